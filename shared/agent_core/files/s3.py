"""The ``s3`` engine: keys as objects of one bucket of any S3-compatible store.

Through obstore (Apache Arrow's ``object_store`` crate): async without a thread per call, typed,
conditional puts (``If-Match`` on the ETag, ``If-None-Match: *``) as S3 and its compatibles
implement them. Credentials come from the standard AWS environment, which obstore reads itself
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL``,
``AWS_REGION``); ``[files.s3]`` values win over it. Requests are retried a few times within
seconds by the client; past that the store counts as unavailable (``file_store_unavailable``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from agent_core.config.files import S3Settings
from agent_core.errors import ConfigError
from agent_core.files.port import (
    CHUNK,
    Download,
    FileStoreError,
    StoredObject,
    VersionConflict,
    append_by_rewrite,
    check_key,
    not_found,
    unavailable,
)

if TYPE_CHECKING:
    from obstore import ObjectMeta, PutMode

__all__ = ["S3FileStore"]

# Uploads up to this size are sent from memory in one PUT; larger ones are spooled to a
# temporary file and sent in parts (obstore's multipart upload).
_IN_MEMORY: Final = 8 * 1024 * 1024
_DELETE_BATCH: Final = 1000
# obstore raises Python's FileNotFoundError for a missing object, its own errors otherwise.
_MISSING: Final = (NotFoundError, FileNotFoundError)
_ERRORS: Final = (BaseError, FileNotFoundError)


def _describe(exc: BaseException) -> str:
    """The first line of an obstore error (its debug dump follows; never shown to users)."""
    return str(exc).split("\n", 1)[0][:300]


class S3FileStore:
    """Keys as objects of ``settings.bucket`` below ``settings.prefix`` (module docstring)."""

    engine: Literal["local", "s3"] = "s3"

    def __init__(self, settings: S3Settings, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ) if env is None else env
        assert settings.bucket is not None  # FileStoreSettings requires it for this engine
        self.bucket = settings.bucket
        endpoint = settings.endpoint_url or env.get("AWS_ENDPOINT_URL")
        region = settings.region or env.get("AWS_REGION") or "us-east-1"
        # Keys given in the environment are passed on as they are (obstore would read the same
        # variables; passing them lets a caller hand in an environment of its own). Without
        # them obstore's chain goes on: web identity, container and instance credentials.
        keys: dict[str, str] = {}
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            keys = {
                "access_key_id": env["AWS_ACCESS_KEY_ID"],
                "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            }
            if env.get("AWS_SESSION_TOKEN"):
                keys["token"] = env["AWS_SESSION_TOKEN"]
        self._store = S3Store(
            settings.bucket,
            prefix=settings.prefix or None,
            endpoint=endpoint,
            region=region,
            **keys,  # type: ignore[arg-type]
            client_options={
                "allow_http": bool(endpoint and endpoint.startswith("http://")),
                "connect_timeout": timedelta(seconds=5),
                "timeout": timedelta(seconds=300),
            },
            retry_config={
                "max_retries": 3,
                "retry_timeout": timedelta(seconds=10),
                "backoff": {
                    "init_backoff": timedelta(milliseconds=100),
                    "max_backoff": timedelta(seconds=2),
                    "base": 2,
                },
            },
        )
        self.endpoint = endpoint or f"AWS S3 ({region})"

    # -------------------------------------------------------------------------------- errors

    def _failed(self, exc: BaseException, key: str) -> FileStoreError:
        if isinstance(exc, _MISSING):
            return not_found(key)
        if isinstance(exc, PreconditionError | AlreadyExistsError):
            return VersionConflict(key)
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError):
            return FileStoreError(
                "file_store_refused", "the file store refused this server's credentials"
            )
        return unavailable(type(exc).__name__)

    async def check(self) -> None:
        try:
            await obstore.list_with_delimiter_async(self._store, prefix=None)
        except _ERRORS as exc:
            text = _describe(exc)
            where = {"bucket": self.bucket, "endpoint": self.endpoint}
            if "NoSuchBucket" in str(exc):
                raise ConfigError(
                    "files_bucket_missing",
                    f"[files.s3] bucket {self.bucket!r} does not exist at {self.endpoint}",
                    details=where,
                ) from None
            if isinstance(exc, PermissionDeniedError | UnauthenticatedError) or any(
                s in str(exc)
                for s in ("403 Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch")
            ):
                raise ConfigError(
                    "files_credentials_refused",
                    f"the file store at {self.endpoint} refused the credentials "
                    "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)",
                    details=where,
                ) from None
            raise ConfigError(
                "files_unreachable",
                f"the file store at {self.endpoint} cannot be reached: {text}",
                details=where,
            ) from None

    # -------------------------------------------------------------------------------- port

    async def put(
        self,
        key: str,
        data: bytes,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        sync: bool = True,
    ) -> str | None:
        del sync  # an object store's write is durable when it is acknowledged
        mode: PutMode = "overwrite"
        if if_absent:
            mode = "create"
        elif if_match is not None:
            mode = {"e_tag": if_match}
        try:
            result = await obstore.put_async(self._store, check_key(key), data, mode=mode)
        except _ERRORS as exc:
            raise self._failed(exc, key) from None
        return result["e_tag"]

    async def append_lines(self, key: str, data: bytes) -> None:
        # An object cannot grow in place: a conditional rewrite, retried (port docstring).
        await append_by_rewrite(self, key, data)

    def put_blocking(self, key: str, data: bytes) -> None:
        try:
            obstore.put(self._store, check_key(key), data)
        except _ERRORS as exc:
            raise self._failed(exc, key) from None

    async def upload(self, key: str, chunks: AsyncIterator[bytes]) -> int:
        check_key(key)
        held = bytearray()
        spool: tempfile._TemporaryFileWrapper[bytes] | None = None
        size = 0
        try:
            async for chunk in chunks:
                size += len(chunk)
                if spool is None and len(held) + len(chunk) <= _IN_MEMORY:
                    held += chunk
                    continue
                if spool is None:
                    spool = tempfile.NamedTemporaryFile(prefix="soong-upload-")  # noqa: SIM115
                    spool.write(held)
                    held.clear()
                spool.write(chunk)
            if spool is None:
                body: bytes | Path = bytes(held)
            else:
                spool.flush()
                body = Path(spool.name)
            try:
                await obstore.put_async(self._store, key, body)
            except _ERRORS as exc:
                raise self._failed(exc, key) from None
        finally:
            if spool is not None:
                spool.close()
        return size

    async def get(self, key: str) -> tuple[bytes, str | None]:
        try:
            result = await obstore.get_async(self._store, check_key(key))
            data = await result.bytes_async()
        except _ERRORS as exc:
            raise self._failed(exc, key) from None
        return bytes(data), result.meta["e_tag"]

    async def get_many(self, keys: Sequence[str]) -> list[tuple[bytes, str | None] | None]:
        return list(await asyncio.gather(*(self._get_or_none(key) for key in keys)))

    async def _get_or_none(self, key: str) -> tuple[bytes, str | None] | None:
        try:
            return await self.get(key)
        except FileStoreError as exc:
            if exc.code == "file_not_found":
                return None
            raise

    async def open(self, key: str) -> Download:
        try:
            result = await obstore.get_async(self._store, check_key(key))
        except _ERRORS as exc:
            raise self._failed(exc, key) from None

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in result.stream(min_chunk_size=CHUNK):
                    yield bytes(chunk)
            except _ERRORS as exc:
                raise self._failed(exc, key) from None

        return Download(result.meta["size"], result.meta["e_tag"], chunks())

    async def head(self, key: str) -> StoredObject | None:
        try:
            meta = await obstore.head_async(self._store, check_key(key))
        except _MISSING:
            return None
        except _ERRORS as exc:
            raise self._failed(exc, key) from None
        return _object(meta)

    async def list(self, prefix: str, *, limit: int) -> list[StoredObject]:
        found: list[StoredObject] = []
        try:
            stream = obstore.list(self._store, prefix=check_key(prefix) + "/", chunk_size=1000)
            async for batch in stream:
                found += [_object(m) for m in batch]
                if len(found) >= limit:
                    break
        except _ERRORS as exc:
            raise self._failed(exc, prefix) from None
        return sorted(found, key=lambda o: o.key)[:limit]

    async def delete(self, keys: Iterable[str]) -> None:
        batch = [check_key(k) for k in keys]
        for i in range(0, len(batch), _DELETE_BATCH):
            try:
                await obstore.delete_async(self._store, batch[i : i + _DELETE_BATCH])
            except _MISSING:
                continue
            except _ERRORS as exc:
                raise self._failed(exc, batch[i]) from None

    async def delete_prefix(self, prefix: str) -> None:
        while objects := await self.list(prefix, limit=_DELETE_BATCH):
            await self.delete(o.key for o in objects)

    def delete_prefix_blocking(self, prefix: str) -> None:
        try:
            for batch in obstore.list(self._store, prefix=check_key(prefix) + "/", chunk_size=1000):
                keys = [m["path"] for m in batch]
                if keys:
                    obstore.delete(self._store, keys)
        except _ERRORS as exc:
            raise self._failed(exc, prefix) from None

    async def close(self) -> None:
        """obstore's client pool closes with the store object."""


def _object(meta: ObjectMeta) -> StoredObject:
    return StoredObject(meta["path"], meta["size"], meta["last_modified"], meta["e_tag"])
