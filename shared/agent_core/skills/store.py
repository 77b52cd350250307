"""An account's own skills kept in the file store, and their copy on a host's disk.

The account's skills folder (``accounts/<account>/skills/<name>/SKILL.md`` and the files beside
it) are keys of the file store (``[files]``). With the ``local`` engine the keys *are* the
folder below the home, so nothing is copied. With ``s3`` a gateway or worker brings the folder
to the store's state (:func:`hydrate_account_skills`) before it scans the account's skills: the
scan and ``load_skill`` read a real folder, and any host sees what was installed through any
other (:func:`install_skill`).

The copy is one-way: only files this function fetched are ever removed from it (their store
versions are kept in the folder's hidden ``.soong-skills.json``, which the scan skips), so a
file an operator placed by hand is left alone. Files are replaced atomically (temp file, rename).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agent_core.errors import SchemaError
from agent_core.files import FileStore, check_key, join_key
from agent_core.skills.model import valid_skill_name

__all__ = ["account_skills_key", "hydrate_account_skills", "install_skill"]

_SEEN: Final = ".soong-skills.json"
# Objects below one account's skills looked at, at most (200 skills of a few files each).
_LISTING_CAP: Final = 10_000
_PARALLEL: Final = 16


def account_skills_key(account_id: str) -> str:
    """``accounts/<account_id>/skills``: where the account's skill folders are kept."""
    return join_key("accounts", account_id, "skills")


async def install_skill(
    store: FileStore, account_id: str, name: str, files: Mapping[str, bytes]
) -> None:
    """Install (or replace) skill ``name`` of ``account_id`` with ``files`` (relative path →
    bytes; ``SKILL.md`` required). Files of an earlier install that ``files`` lacks are removed;
    ``SKILL.md`` is written last, so a scan finds the skill only once its files are there.
    Raises ``SchemaError`` for an invalid name or a set without ``SKILL.md``, ``FileStoreError``
    ``invalid_key`` for a path that climbs out."""
    if not valid_skill_name(name):
        raise SchemaError("invalid_skill_name", "a skill's name is lowercase letters, digits, - _")
    if "SKILL.md" not in files:
        raise SchemaError("skill_md_missing", "a skill needs a SKILL.md")
    base = join_key(account_skills_key(account_id), name)
    wanted = {join_key(base, check_key(rel)): data for rel, data in files.items()}
    before = {o.key for o in await store.list(base, limit=_LISTING_CAP)}
    skill_md = join_key(base, "SKILL.md")
    for key, data in wanted.items():
        if key != skill_md:
            await store.put(key, data)
    await store.put(skill_md, wanted[skill_md])
    await store.delete(sorted(before - set(wanted)))


async def hydrate_account_skills(store: FileStore, home: Path, account_id: str) -> int:
    """Bring ``<home>/accounts/<account_id>/skills`` to the store's state (``s3`` only; the
    ``local`` engine's store is that folder); the number of files fetched. Raises
    ``FileStoreError`` when the store cannot be read (``file_store_unavailable`` is retryable)."""
    if store.engine == "local":
        return 0
    prefix = account_skills_key(account_id)
    folder = home.joinpath(*prefix.split("/"))
    objects = await store.list(prefix, limit=_LISTING_CAP)
    wanted = {o.key.removeprefix(prefix + "/"): o.etag for o in objects}
    seen = await asyncio.to_thread(_read_seen, folder)
    stale = [rel for rel, tag in wanted.items() if tag is None or seen.get(rel) != tag]
    gate = asyncio.Semaphore(_PARALLEL)

    async def fetch(rel: str) -> None:
        async with gate:
            data, tag = await store.get(f"{prefix}/{rel}")
        await asyncio.to_thread(_write, folder, rel, data)
        seen[rel] = tag

    await asyncio.gather(*(fetch(rel) for rel in stale))
    gone = [rel for rel in seen if rel not in wanted]
    for rel in gone:
        seen.pop(rel)
    if stale or gone:
        await asyncio.to_thread(_remove_and_record, folder, gone, seen)
    return len(stale)


def _read_seen(folder: Path) -> dict[str, str | None]:
    try:
        data = json.loads((folder / _SEEN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v if isinstance(v, str) else None for k, v in dict(data).items()}


def _write(folder: Path, rel: str, data: bytes) -> None:
    """``data`` at ``folder/rel`` atomically; never through a link (a key's parts are checked,
    and the final name is replaced, not opened)."""
    target = folder.joinpath(*check_key(rel).split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".soong-tmp-{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _remove_and_record(folder: Path, gone: list[str], seen: dict[str, str | None]) -> None:
    for rel in gone:
        path = folder.joinpath(*check_key(rel).split("/"))
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError):
            path.unlink()
        # Folders the removal left empty go too (a removed skill leaves no empty folder).
        for parent in path.parents:
            if parent == folder or folder not in parent.parents:
                break
            with contextlib.suppress(OSError):
                parent.rmdir()
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder, _SEEN, json.dumps(seen, sort_keys=True).encode("utf-8"))
