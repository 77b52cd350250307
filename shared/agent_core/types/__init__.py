"""Typed core in three layers (seed 001): ``protocol`` (provider/tool/hook boundary), ``runtime``
(loop and SDK callers), ``storage`` (SQLite rows), plus shared ``enums`` and the ``mappers`` between
storage and runtime. Import names from the layer modules themselves.
"""

from agent_core.types import enums, mappers, protocol, runtime, storage

__all__ = ["enums", "mappers", "protocol", "runtime", "storage"]
