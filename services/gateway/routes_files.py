"""Artifacts (list, metadata, download) and workspace files (upload to ``input/``; list and
download in ``input/``, ``scratchpad/`` and ``output/``), all through the file store
(``agent_core.files``): a session's files are reachable from any host's gateway.

Paths are checked as the workspace's tools check them (``..`` and absolute paths are refused),
then become store keys below the session's prefix; the local engine also keeps symlinks from
leading out of the session. Uploads land only in ``input/``. An upload is either the raw request
body (``PUT …/files/input/<name>``) or a ``multipart/form-data`` form of one or more ``file``
parts (``POST …/files``, what a browser form or ``curl -F`` sends). Either way the store writes
each file whole once it arrived within the size limit, so a cut upload never leaves a partial
file. An artifact is addressed by its row's store key (an offloaded JSON block) or workspace
path, never by a host path; rows written before the store held the writer's absolute path, which
maps to the same key.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.datastructures import UploadFile

from agent_core.bus.contracts.storage import GetArtifact, ListArtifacts
from agent_core.files import FileStoreError, artifact_key, join_key, session_prefix
from agent_core.files.port import artifact_prefix
from agent_core.ids import is_valid_id
from agent_core.tools import Workspace
from agent_core.tools.paths import Area
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
# What an offloaded JSON artifact's row held before the store: the writer's absolute path.
_LEGACY_ARTIFACT = re.compile(r"/artifacts/([A-Za-z0-9_]+)/(artifact_[A-Za-z0-9_]+\.json)$")
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
    """The session's path rules (no I/O: the files themselves are the store's)."""
    return Workspace(gw.ctx.settings.home, session.account_id, session.session_id)


def _key(session: SessionState, path: str) -> str:
    """The store key of a checked workspace path of ``session``."""
    return join_key(session_prefix(session.account_id, session.session_id), path)


async def _download(
    gw: Gateway, key: str, *, media_type: str | None, filename: str | None
) -> StreamingResponse:
    download = await gw.files.open(key)
    name = filename or key.rsplit("/", 1)[-1]
    kind = media_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    safe = "".join(c for c in name if c.isascii() and c.isprintable() and c not in '"\\;') or "file"
    headers = {
        "Content-Length": str(download.size),
        "Content-Disposition": f'attachment; filename="{safe}"',
        "X-Content-Type-Options": "nosniff",
    }
    return StreamingResponse(download.chunks, media_type=kind, headers=headers)


def _artifact_key(gw: Gateway, session: SessionState, ref: ArtifactRef) -> str:
    """Where an artifact's bytes are: its row's store key when the writer made it, else the
    session's workspace path it names (checked as a tool's path is)."""
    sid = session.session_id
    if ref.path.startswith(artifact_prefix(sid) + "/"):
        return ref.path
    legacy = _LEGACY_ARTIFACT.search(ref.path)
    if legacy is not None and legacy.group(1) == sid:
        return artifact_key(sid, legacy.group(2))
    return _key(session, str(_workspace(gw, session).resolve(ref.path)))


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
    key = _artifact_key(gw, session, ref)
    return await _download(gw, key, media_type=ref.mime_type, filename=ref.filename)


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
    session = await get_session(gw, caller, session_id)
    prefix = session_prefix(session.account_id, session.session_id)
    items: list[FileEntry] = []
    for name in _AREAS if area == "all" else (area,):
        left = limit - len(items)
        if left <= 0:
            break
        items += [
            FileEntry(
                path=o.key.removeprefix(prefix + "/"), size_bytes=o.size, modified_at=o.modified_at
            )
            for o in await gw.files.list(f"{prefix}/{name}", limit=left)
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
    session = await get_session(gw, caller, session_id)
    resolved = _workspace(gw, session).resolve(f"{area}/{path}")
    if resolved.area is not Area(area):
        raise not_found("file")
    try:
        key = _key(session, str(resolved))
    except FileStoreError:
        # A name no stored file can have (a backslash, say): there is no such file to send.
        raise not_found("file") from None
    return await _download(gw, key, media_type=None, filename=None)


def _check_name(name: str) -> str:
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(name.encode("utf-8", "surrogatepass")) > 255
        or name.startswith(".soong-tmp-")
    ):
        raise ApiError(
            400,
            "invalid_filename",
            "give one file name of at most 255 bytes in UTF-8 (no folders, no '..', no backslash)",
        )
    return name


async def _store_upload(
    gw: Gateway, session: SessionState, name: str, chunks: AsyncIterator[bytes], limit: int
) -> UploadedFile:
    """Store what ``chunks`` yields as ``input/<name>`` (replacing a file of that name) once it
    arrived whole; a body over ``limit`` bytes, or a store that fails, leaves nothing behind."""

    async def capped() -> AsyncIterator[bytes]:
        size = 0
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit)
            yield chunk

    try:
        size = await gw.files.upload(_key(session, f"{Area.INPUT.value}/{name}"), capped())
    except FileStoreError as exc:
        if exc.code == "file_is_a_directory":
            raise ApiError(409, "is_a_directory", f"input/{name} is a directory") from None
        raise
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
    session = await get_session(gw, caller, session_id)
    limit = gw.ctx.settings.gateway.max_upload_bytes
    return await _store_upload(gw, session, name, request.stream(), limit)


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
    session = await get_session(gw, caller, session_id)
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
                await _store_upload(gw, session, name, _parts(f), limit)
                for name, f in zip(names, files, strict=True)
            ]
        )
    finally:
        await form.close()
