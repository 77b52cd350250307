"""The content of a run's attachments, read from its session's files for each model request.

:class:`MediaAdapter` wraps the run's model: before a request goes out it resolves the
``attachment`` blocks (files in ``input/``) and ``artifact_ref`` blocks (outputs handed back) of
the request's user messages into ``ModelRequest.media`` (``agent_core/provider/media.py``), which
each adapter maps onto its provider's own parts. A block stays a note, and the model reads the file
with its tools, when the model does not take its kind (its config's ``accepts``; the gateway
refuses such a new message, so this is history written under another model), when the file is
not an image, a PDF or text, when it is over :data:`MAX_BYTES`, or when it is gone. Content is
read once per run (a run's files in ``input/`` do not change: agents cannot write there).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from agent_core.bus.contracts.storage import GetArtifact
from agent_core.errors import AgentCoreError
from agent_core.provider.base import ProviderAdapter
from agent_core.provider.media import MediaKind, accepted_kinds, kind_of, media_key, mime_of
from agent_core.tools import Workspace
from agent_core.types.enums import Role
from agent_core.types.mappers import to_artifact_ref
from agent_core.types.protocol import (
    ArtifactRefBlock,
    AttachmentBlock,
    MediaPart,
    ModelEvent,
    ModelRequest,
)
from agent_core.types.runtime import AgentConfig, ArtifactRef
from services.run_worker.reads import RunReads

__all__ = ["MAX_BYTES", "MAX_TEXT_CHARS", "MediaAdapter", "with_media"]

log = logging.getLogger("soong.run_worker")

# Per attachment: what the providers take inline (Anthropic: 5 MB an image; a PDF's base64 must
# fit a request of 32 MB), and what a text document may add to the context.
MAX_BYTES: Final[dict[str, int]] = {"image": 5 * 2**20, "pdf": 16 * 2**20, "text": 2**20}
MAX_TEXT_CHARS: Final = 32_000

ArtifactLookup = Callable[[str], Awaitable[ArtifactRef | None]]


class MediaAdapter:
    """A run's model with its attachments' content (same contract as the wrapped adapter)."""

    def __init__(
        self,
        inner: ProviderAdapter,
        workspace: Workspace,
        accepts: frozenset[MediaKind],
        artifacts: ArtifactLookup,
    ) -> None:
        self.inner = inner
        self.workspace = workspace
        self.accepts = accepts
        self.artifacts = artifacts
        self._parts: dict[str, MediaPart | None] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The wrapped adapter's events for ``request`` with its media resolved."""
        media = await self.media(request)
        if media:
            request = request.model_copy(update={"media": {**request.media, **media}})
        async for event in self.inner.stream(request):
            yield event

    async def media(self, request: ModelRequest) -> dict[str, MediaPart]:
        """The content of the attachment blocks of ``request``'s user messages, by key."""
        out: dict[str, MediaPart] = {}
        for message in request.messages:
            if message.role != Role.USER:
                continue  # an artifact in a tool result is the tool's output: a note
            for block in message.content:
                if not isinstance(block, AttachmentBlock | ArtifactRefBlock):
                    continue
                key = media_key(block)
                if key not in self._parts:
                    self._parts[key] = await self._resolve(block)
                part = self._parts[key]
                if part is not None:
                    out[key] = part
        return out

    async def _resolve(self, block: AttachmentBlock | ArtifactRefBlock) -> MediaPart | None:
        if isinstance(block, AttachmentBlock):
            path, mime, name = block.path, block.mime_type, block.filename
        else:
            try:
                artifact = await self.artifacts(block.artifact_id)
            except AgentCoreError as exc:
                log.warning("artifact %s not read: %s", block.artifact_id, exc.code)
                return None
            if artifact is None:
                return None
            path, mime = artifact.path, artifact.mime_type or block.mime_type
            name = artifact.filename or block.filename
        kind = kind_of(mime, name or path)
        if kind is None or (kind != "text" and kind not in self.accepts):
            return None
        try:
            data = await asyncio.to_thread(self._read, path, MAX_BYTES[kind] + 1)
        except (AgentCoreError, OSError) as exc:
            log.info("attachment %s not sent: %s", path[:200], type(exc).__name__)
            return None
        if len(data) > MAX_BYTES[kind]:
            return None
        mime = mime_of(mime, name or path) or "text/plain"
        if kind == "text":
            text = data.decode("utf-8", errors="replace")
            if len(text) > MAX_TEXT_CHARS:
                text = (
                    f"{text[:MAX_TEXT_CHARS]}\n[… cut at {MAX_TEXT_CHARS} characters: "
                    f"read the rest of {path} with read_file]"
                )
            return MediaPart(kind="text", mime_type=mime, data=text, filename=name)
        encoded = base64.b64encode(data).decode("ascii")
        return MediaPart(kind=kind, mime_type=mime, data=encoded, filename=name)

    def _read(self, path: str, limit: int) -> bytes:
        data, _ = self.workspace.fs.read_bytes(self.workspace.resolve(path), limit=limit)
        return data


def with_media(
    inner: ProviderAdapter,
    config: AgentConfig,
    workspace: Workspace,
    reads: RunReads,
    session_id: str,
) -> MediaAdapter:
    """``inner`` as a run of ``session_id`` uses it: attachments as its config accepts them,
    artifacts looked up in that session only."""

    async def artifact(artifact_id: str) -> ArtifactRef | None:
        record = await reads.read(GetArtifact(artifact_id=artifact_id, session_id=session_id))
        return None if record is None else to_artifact_ref(record)

    accepts = accepted_kinds(config.provider, config.accepts)
    return MediaAdapter(inner, workspace, accepts, artifact)
