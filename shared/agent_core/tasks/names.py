"""Turn a model-chosen task list name into a safe, unique WAL file name.

The name comes from a model, so it may hold separators, ``..``, NUL, control characters, any
script, or be huge. The file stem is built from ASCII ``[a-z0-9_-]`` only (lower case, because
macOS and Windows file systems ignore case), starts with a letter or digit, and is bounded.

Distinct names never share a file: a name that is already a clean stem is used as it is; any
other name (lossy to sanitize) gets ``-`` + 12 hex digits of the SHA-256 of its NFC form appended.
Clean stems may not end in that suffix shape themselves, so the two kinds can never collide, and
two hashed stems collide only if 48-bit hashes do.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

__all__ = ["WAL_SUFFIX", "list_file_name", "list_file_stem"]

WAL_SUFFIX: Final = ".wal.jsonl"
_MAX_STEM = 64  # + "-" + 12 hex + suffix stays far below the usual 255-byte file name limit
_HASH_HEX = 12
_CLEAN = re.compile(rf"[a-z0-9][a-z0-9_-]{{0,{_MAX_STEM - 1}}}")
_HASHED_SHAPE = re.compile(rf".*-[0-9a-f]{{{_HASH_HEX}}}")
_UNSAFE_RUN = re.compile(r"[^a-z0-9_-]+")
# Device names Windows refuses as file names, whatever the extension.
_RESERVED: Final = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)


def list_file_stem(name: str) -> str:
    """The safe file stem of task list ``name``: deterministic, injective in practice, bounded."""
    if _is_clean(name):
        return name
    normalized = unicodedata.normalize("NFC", name)
    digest = hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]
    # NFKD then dropping combining marks turns "Café" into "cafe"; other scripts become "_".
    folded = unicodedata.normalize("NFKD", normalized).casefold()
    ascii_only = "".join(c for c in folded if not unicodedata.combining(c))
    readable = _UNSAFE_RUN.sub("_", ascii_only).strip("_-")[:_MAX_STEM].rstrip("_-")
    return f"{readable or 'list'}-{digest}"


def list_file_name(name: str) -> str:
    """The WAL file name (``<stem>.wal.jsonl``) of task list ``name``."""
    return list_file_stem(name) + WAL_SUFFIX


def _is_clean(name: str) -> bool:
    return (
        _CLEAN.fullmatch(name) is not None
        and _HASHED_SHAPE.fullmatch(name) is None
        and name not in _RESERVED
    )
