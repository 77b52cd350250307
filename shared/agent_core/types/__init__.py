"""Typed core in three layers: ``protocol`` (provider/tool/hook boundary), ``runtime``
(loop and SDK callers), ``storage`` (SQLite rows), plus shared ``enums``, the ``mappers`` between
storage and runtime, and ``api`` (the HTTP API's own request and response bodies, shared by the
gateway and the client SDK). Import names from the layer modules themselves.
"""

from agent_core.types import api, enums, mappers, protocol, runtime, storage

__all__ = ["api", "enums", "mappers", "protocol", "runtime", "storage"]
