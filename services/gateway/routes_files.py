"""Artifacts (list, metadata, download) and workspace files (upload to ``input/``; list and
download in ``input/``, ``scratchpad/`` and ``output/``).

Every path goes through the workspace's confined file access: symlinks cannot lead out of the
session, ``..`` and absolute paths are refused, and uploads land only in ``input/``. An upload is
either the raw request body (``PUT …/files/input/<name>``) or a ``multipart/form-data`` form of
one or more ``file`` parts (``POST …/files``, what a browser form or ``curl -F`` sends). Either
way each file is streamed to a temporary file and renamed into place once it arrived whole within
the size limit, so a cut upload never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile

from agent_core.bus.contracts.storage import GetArtifact, ListArtifacts
from agent_core.ids import is_valid_id
from agent_core.tools import Workspace
from agent_core.tools.paths import Area, SessionPath
from agent_core.types.api import ArtifactList, FileEntry, FileList, UploadedFile, UploadedFiles
from agent_core.types.mappers import to_artifact_ref
from agent_core.types.runtime import ArtifactRef, SessionState
from services.gateway.errors import ApiError, not_found, responses
from services.gateway.limits import BodyTooLarge
from services.gateway.state import CallerDep, Gateway, GatewayDep, fetch, get_session

__all__ = ["is_upload", "router"]

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["files"])

UPLOAD_PREFIX = "/files/input/"
_AREAS = ("input", "scratchpad", "output")
_CHUNK = 64 * 1024
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DOWNLOAD: dict[int | str, dict[str, Any]] = {
    200: {
        # Served with the media type its name suggests (text/markdown, text/csv, image/png, …;
        # application/octet-stream when none does): any type, documented as such.
        "description": "The file's bytes, typed by its name (application/octet-stream if unknown)",
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def is_upload(path: str) -> bool:
    """Whether a request path's body is an upload (the upload cap, not the JSON body cap): the
    raw ``PUT …/files/input/<name>`` or the ``POST …/files`` form."""
    return UPLOAD_PREFIX in path or path.endswith("/files")


def _workspace(gw: Gateway, session: SessionState) -> Workspace:
    ws = Workspace(gw.ctx.settings.home, session.account_id, session.session_id)
    ws.ensure()
    return ws


def _stream_fd(fd: int) -> Iterator[bytes]:
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk


def _download(
    ws: Workspace, raw: str, *, media_type: str | None, filename: str | None
) -> StreamingResponse:
    path = ws.resolve(raw)
    fd, real = ws.fs.open_read(path)
    size = os.fstat(fd).st_size
    name = filename or real.name
    kind = media_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    safe = "".join(c for c in name if c.isascii() and c.isprintable() and c not in '"\\;') or "file"
    headers = {
        "Content-Length": str(size),
        "Content-Disposition": f'attachment; filename="{safe}"',
        "X-Content-Type-Options": "nosniff",
    }
    return StreamingResponse(_stream_fd(fd), media_type=kind, headers=headers)


@router.get("/artifacts", response_model=ArtifactList, responses=responses(404))
async def list_artifacts(session_id: str, gw: GatewayDep, caller: CallerDep) -> ArtifactList:
    """Artifacts of the session, oldest first."""
    await get_session(gw, caller, session_id)
    query = ListArtifacts(session_id=session_id, account_id=caller.account_id)
    records = await fetch(gw, query, "session")
    return ArtifactList(items=[to_artifact_ref(r) for r in records])


async def _artifact(
    gw: Gateway, caller: CallerDep, session_id: str, artifact_id: str
) -> ArtifactRef:
    await get_session(gw, caller, session_id)
    if not is_valid_id(artifact_id, "artifact"):
        raise not_found("artifact")
    query = GetArtifact(
        artifact_id=artifact_id, session_id=session_id, account_id=caller.account_id
    )
    ref = to_artifact_ref(await fetch(gw, query, "artifact"))
    if ref.session_id != session_id:
        raise not_found("artifact")
    return ref


@router.get("/artifacts/{artifact_id}", response_model=ArtifactRef, responses=responses(404))
async def read_artifact(
    session_id: str, artifact_id: str, gw: GatewayDep, caller: CallerDep
) -> ArtifactRef:
    """One artifact's metadata and provenance."""
    return await _artifact(gw, caller, session_id, artifact_id)


@router.get(
    "/artifacts/{artifact_id}/content",
    response_class=StreamingResponse,
    responses={**_DOWNLOAD, **responses(400, 404)},
)
async def download_artifact(
    session_id: str, artifact_id: str, gw: GatewayDep, caller: CallerDep
) -> StreamingResponse:
    """The artifact's bytes, with its content type."""
    ref = await _artifact(gw, caller, session_id, artifact_id)
    session = await get_session(gw, caller, session_id)
    return _download(
        _workspace(gw, session), ref.path, media_type=ref.mime_type, filename=ref.filename
    )


@router.get("/files", response_model=FileList, responses=responses(404))
async def list_files(
    session_id: str,
    gw: GatewayDep,
    caller: CallerDep,
    area: Literal["all", "input", "scratchpad", "output"] = "all",
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> FileList:
    """Regular files below ``input/``, ``scratchpad/`` and ``output/`` (``area`` picks one; by
    default all three, uploads included), by area then path; symlinks are not followed."""
    ws = _workspace(gw, await get_session(gw, caller, session_id))
    items: list[FileEntry] = []
    for name in _AREAS if area == "all" else (area,):
        left = limit - len(items)
        if left <= 0:
            break
        items += [
            FileEntry(
                path=str(e.path),
                size_bytes=e.size,
                modified_at=datetime.fromtimestamp(e.mtime_ns / 1e9, UTC),
            )
            for e in ws.fs.walk(SessionPath((name,)), max_entries=left)
            if e.kind == "file"
        ]
    return FileList(items=items)


@router.get(
    "/files/{area}/{path:path}",
    response_class=StreamingResponse,
    responses={**_DOWNLOAD, **responses(400, 404)},
)
async def download_file(
    session_id: str,
    area: Literal["input", "scratchpad", "output"],
    path: str,
    gw: GatewayDep,
    caller: CallerDep,
) -> StreamingResponse:
    """Download a file of ``output/``, ``scratchpad/`` or ``input/``."""
    ws = _workspace(gw, await get_session(gw, caller, session_id))
    resolved = ws.resolve(f"{area}/{path}")
    if resolved.area is not Area(area):
        raise not_found("file")
    return _download(ws, str(resolved), media_type=None, filename=None)


def _check_name(name: str) -> str:
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\x00" in name
        or len(name.encode("utf-8", "surrogatepass")) > 255
        or name.startswith(".soong-tmp-")
    ):
        raise ApiError(
            400,
            "invalid_filename",
            "give one file name of at most 255 bytes in UTF-8 (no folders, no '..')",
        )
    return name


async def _store_upload(
    ws: Workspace, name: str, chunks: AsyncIterator[bytes], limit: int
) -> UploadedFile:
    """Stream ``chunks`` to a temporary file in ``input/`` and rename it to ``name`` once whole
    (replacing a file of that name); a body over ``limit`` bytes leaves nothing behind."""
    dir_fd, _ = ws.fs.open_dir(SessionPath((Area.INPUT.value,)))
    tmp = f".soong-tmp-{secrets.token_hex(8)}"
    size = 0
    try:
        fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLarge(limit)
                    fh.write(chunk)
            try:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except IsADirectoryError as exc:
                raise ApiError(409, "is_a_directory", f"input/{name} is a directory") from exc
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)
    return UploadedFile(path=f"input/{name}", size_bytes=size)


async def _parts(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(_CHUNK):
        yield chunk


@router.put(
    # ``:path`` so that a name with a slash (even one sent as %2F, which the server decodes before
    # routing) reaches the handler and gets its 400, instead of another route's 405.
    UPLOAD_PREFIX + "{filename:path}",
    status_code=201,
    response_model=UploadedFile,
    responses=responses(400, 404, 409, 413),
    openapi_extra={
        "requestBody": {
            "required": False,  # no body: an empty file, as HTTP cannot tell the two apart
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def upload_file(
    session_id: str, filename: str, request: Request, gw: GatewayDep, caller: CallerDep
) -> UploadedFile:
    """Upload the raw body as ``input/<filename>`` (replacing a file of that name)."""
    name = _check_name(filename)
    ws = _workspace(gw, await get_session(gw, caller, session_id))
    limit = gw.ctx.settings.gateway.max_upload_bytes
    return await _store_upload(ws, name, request.stream(), limit)


# A form of at most this many parts: each file is one; anything else in the form is refused.
_MAX_FORM_FILES = 100


@router.post(
    "/files",
    status_code=201,
    response_model=UploadedFiles,
    responses=responses(400, 404, 409, 413, 415),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": ["file"],
                        "additionalProperties": False,
                        "properties": {
                            "file": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "string", "format": "binary"},
                            }
                        },
                    }
                }
            },
        }
    },
)
async def upload_form(
    session_id: str, request: Request, gw: GatewayDep, caller: CallerDep
) -> UploadedFiles:
    """Upload each ``file`` part of a ``multipart/form-data`` body to ``input/<its filename>``
    (``curl -F file=@report.csv``); the whole request's bytes count against the upload cap."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(
            415,
            "unsupported_media_type",
            "send multipart/form-data with one or more 'file' parts "
            "(or PUT the raw bytes to …/files/input/<name>)",
        )
    ws = _workspace(gw, await get_session(gw, caller, session_id))
    limit = gw.ctx.settings.gateway.max_upload_bytes
    form = await request.form(max_files=_MAX_FORM_FILES, max_fields=_MAX_FORM_FILES)
    try:
        parts = form.multi_items()
        if not parts or any(key != "file" or not isinstance(v, UploadFile) for key, v in parts):
            raise ApiError(400, "invalid_form", "give one or more 'file' parts and nothing else")
        files = [v for _, v in parts if isinstance(v, UploadFile)]
        names = [_check_name(f.filename or "") for f in files]
        return UploadedFiles(
            items=[
                await _store_upload(ws, name, _parts(f), limit)
                for name, f in zip(names, files, strict=True)
            ]
        )
    finally:
        await form.close()
