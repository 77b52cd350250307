"""The attachments and artifact references of a posted message, checked before its run exists.

- An ``artifact_ref`` must name an artifact of the message's own session: another session's (the
  caller's or anyone's) or an unknown id is a 422 ``invalid_artifact_ref``. The block is stored
  with the artifact's file name and MIME type, as the model's note shows them.
- An image or PDF (an attachment, or an artifact handed back) that the run's model does not take
  (its config's ``accepts``, ``agent_core/provider/media.py``) is a 422 ``attachment_not_accepted``
  naming the model and what it takes: the message is refused rather than shown to a model that
  would not see it.

Only messages that carry such blocks pay the session read this takes.
"""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import GetArtifact
from agent_core.config import agent_config
from agent_core.errors import ConfigError
from agent_core.ids import is_valid_id
from agent_core.provider.media import accepted_kinds, kind_of
from agent_core.types.api import UserBlock, stored_overrides
from agent_core.types.mappers import to_artifact_ref
from agent_core.types.protocol import ArtifactRefBlock, AttachmentBlock
from agent_core.types.runtime import AgentConfig
from services.gateway.auth import Caller
from services.gateway.errors import ApiError
from services.gateway.state import Gateway, fetch_optional, get_session

__all__ = ["checked_blocks"]


async def checked_blocks(
    gw: Gateway,
    caller: Caller,
    session_id: str,
    blocks: list[UserBlock],
    overrides: dict[str, Any] | None,
) -> list[UserBlock]:
    """``blocks`` as stored (artifact references completed), or the 422 that refuses them."""
    if not any(isinstance(b, AttachmentBlock | ArtifactRefBlock) for b in blocks):
        return blocks
    session = await get_session(gw, caller, session_id)
    try:
        config = agent_config(
            gw.ctx.settings, {**stored_overrides(session.metadata), **(overrides or {})}
        )
    except ConfigError:
        config = None  # the run itself reports a config no run can start with
    out: list[UserBlock] = []
    for block in blocks:
        if isinstance(block, ArtifactRefBlock):
            block = await _artifact(gw, caller, session_id, block)
        if config is not None and isinstance(block, AttachmentBlock | ArtifactRefBlock):
            _check_accepted(block, config)
        out.append(block)
    return out


def _check_accepted(block: AttachmentBlock | ArtifactRefBlock, config: AgentConfig) -> None:
    """422 when ``block`` is an image or a PDF that ``config``'s model does not take."""
    accepts = accepted_kinds(config.provider, config.accepts)
    named = block.path if isinstance(block, AttachmentBlock) else None
    kind = kind_of(block.mime_type, block.filename or named)
    if kind in ("image", "pdf") and kind not in accepts:
        taken = ", ".join(sorted(accepts)) or "no attachments"
        raise ApiError(
            422,
            "attachment_not_accepted",
            f"model {config.model!r} ({config.provider}) takes no {kind} attachments "
            f"(it takes {taken}; the operator sets this with `accepts` in [model] or "
            "[providers.<name>])",
            details={"kind": kind, "accepts": sorted(accepts), "model": config.model},
        )


async def _artifact(
    gw: Gateway, caller: Caller, session_id: str, block: ArtifactRefBlock
) -> ArtifactRefBlock:
    """The block with its artifact's display fields, or a 422 when it is not this session's."""
    refused = ApiError(
        422,
        "invalid_artifact_ref",
        f"artifact {block.artifact_id[:80]!r} is not an artifact of this session",
        details={"artifact_id": block.artifact_id[:80]},
    )
    if not is_valid_id(block.artifact_id, "artifact"):
        raise refused
    query = GetArtifact(
        artifact_id=block.artifact_id, session_id=session_id, account_id=caller.account_id
    )
    record = await fetch_optional(gw, query)
    if record is None:
        raise refused
    artifact = to_artifact_ref(record)
    if artifact.session_id != session_id:
        raise refused
    return block.model_copy(
        update={
            # The record's own name and type win: they decide how the model gets the content.
            "filename": artifact.filename or block.filename,
            "mime_type": artifact.mime_type or block.mime_type,
            "summary": block.summary or artifact.summary,
        }
    )
