"""Attachments as content: which kinds a model takes, and a user message's parts.

A user message's ``attachment`` blocks (files in ``input/``) and ``artifact_ref`` blocks (an
earlier output handed back) reach the model as content when the request carries their
:class:`~agent_core.types.protocol.MediaPart` under :func:`media_key`: an image as the provider's
image part, a PDF as its document part, a text document as text. What a model takes is its
config's ``accepts`` (``[model] accepts`` or ``[providers.<name>] accepts``), by default
:func:`default_accepts` of its provider kind; a block without media is sent as a short note.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable
from typing import Final, Literal

from agent_core.provider.content import block_text
from agent_core.types.protocol import (
    ArtifactRefBlock,
    AttachmentBlock,
    ContentBlock,
    MediaPart,
    ToolCallBlock,
    ToolResultBlock,
)

__all__ = [
    "IMAGE_TYPES",
    "MediaKind",
    "accepted_kinds",
    "default_accepts",
    "kind_of",
    "media_key",
    "mime_of",
    "note_with",
    "user_parts",
]

MediaKind = Literal["image", "pdf"]
_KINDS: Final[tuple[MediaKind, ...]] = ("image", "pdf")
# The image formats OpenAI, Anthropic and Ollama all take.
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_TEXT_TYPES: Final = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml"}
)
# What each built-in provider kind takes when its config says nothing: OpenAI's chat takes
# images (``image_url``) and PDFs (``file``), Anthropic images and PDFs (``document``), Ollama
# images only (``images``). Plug-in providers and the demo model take none unless configured.
_DEFAULTS: Final[dict[str, frozenset[MediaKind]]] = {
    "openai": frozenset({"image", "pdf"}),
    "anthropic": frozenset({"image", "pdf"}),
    "ollama": frozenset({"image"}),
}


def default_accepts(provider: str) -> frozenset[MediaKind]:
    """The kinds of attachment a provider kind takes by default."""
    return _DEFAULTS.get(provider, frozenset())


def mime_of(mime_type: str | None, filename: str | None) -> str:
    """An attachment's MIME type: the block's own (without parameters), else guessed from the
    file name (``""`` when neither says)."""
    return (mime_type or mimetypes.guess_type(filename or "")[0] or "").split(";")[0].lower()


def accepted_kinds(provider: str, accepts: Iterable[str] | None) -> frozenset[MediaKind]:
    """What a model takes: its config's ``accepts``, else its provider kind's default."""
    if accepts is None:
        return default_accepts(provider)
    return frozenset(k for k in _KINDS if k in set(accepts))


def kind_of(mime_type: str | None, filename: str | None) -> Literal["image", "pdf", "text"] | None:
    """What an attachment is for a model: an image, a PDF, a text document, or ``None`` (any other
    file: the model gets a note and reads it with tools); see :func:`mime_of`."""
    mime = mime_of(mime_type, filename)
    if mime in IMAGE_TYPES:
        return "image"
    if mime == "application/pdf":
        return "pdf"
    if mime.startswith("text/") or mime in _TEXT_TYPES:
        return "text"
    return None


def media_key(block: AttachmentBlock | ArtifactRefBlock) -> str:
    """The key of a block's content in ``ModelRequest.media``."""
    if isinstance(block, AttachmentBlock):
        return block.path
    return f"artifact:{block.artifact_id}"


def note_with(block: AttachmentBlock | ArtifactRefBlock, text: str) -> str:
    """A text document as the model reads it: the block's note, then the text."""
    return f"{block_text(block)}\n{text}"


def user_parts(
    blocks: Iterable[ContentBlock], media: dict[str, MediaPart]
) -> list[str | MediaPart]:
    """A user message's content in order: texts (adjacent ones joined by blank lines; a text
    document joined in as text) and the image and PDF parts (tool blocks are left out)."""
    parts: list[str | MediaPart] = []
    for block in blocks:
        if isinstance(block, ToolCallBlock | ToolResultBlock):
            continue
        text, found = block_text(block), None
        if isinstance(block, AttachmentBlock | ArtifactRefBlock):
            found = media.get(media_key(block))
            if found is not None and found.kind == "text":
                text, found = note_with(block, found.data), None
        # The note first, also before an image: it names the file the model may refer to.
        if parts and isinstance(parts[-1], str):
            parts[-1] = f"{parts[-1]}\n\n{text}"
        else:
            parts.append(text)
        if found is not None:
            parts.append(found)
    return parts
