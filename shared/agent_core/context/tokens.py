"""Token accounting without a tokenizer: an offline estimate, model limits and calibration.

No tokenizer is downloaded at run time, so sizes are estimated from the text itself with a weight
per character class — what BPE vocabularies of current models do on average:

* Latin letters in words: about four characters a token (common words are one token);
* digits: up to three a token;
* punctuation and symbols — the bulk of code and JSON — about one and a half characters a token;
* a single space: almost nothing (it joins the word after it); a run of indentation, a tab or a
  line break: about one token;
* a JSON ``\\uXXXX`` escape (how non-ASCII text travels inside tool arguments): several tokens;
* CJK ideographs, kana and hangul: about one token each;
* other non-ASCII letters (accented Latin, Cyrillic, Greek, …): about two characters a token.

The estimate is then *calibrated*: the loop feeds every response's provider-reported
``input_tokens`` against the estimate of the request it sent (:class:`Calibration`), and budgets
use the estimate times the smoothed ratio, so a model whose tokenizer is denser or sparser than the
weights assume is tracked within a few turns.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent_core.types.protocol import (
    ArtifactRefBlock,
    ContentBlock,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
)
from agent_core.types.runtime import Node

__all__ = [
    "CALIBRATION",
    "WINDOWS",
    "LearnedWindows",
    "DEFAULT_LIMITS",
    "Calibration",
    "ModelLimits",
    "estimate_blocks",
    "estimate_text",
    "estimate_tools",
    "model_limits",
    "node_tokens",
]

_LETTERS = re.compile(r"[A-Za-z]")
_WORDS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]")
_SPACE_RUNS = re.compile(r"\s+")
_BREAKS = re.compile(r" {2,}|[\t\r\n]+")  # indentation, tabs, line breaks: a token a run
_ESCAPES = re.compile(r"\\u[0-9a-fA-F]{4}")  # JSON's \uXXXX: several tokens each
_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WIDE_PUNCT = re.compile(r"[\u3000-\u303f\uff00-\uffef]")

# Tokens per character (or per run) of each class; see the module docstring.
_PER_LETTER = 0.16
_PER_WORD = 0.3  # a short word is one token whatever its length: a floor per word
_PER_DIGIT = 0.36
_PER_PUNCT = 0.7
_PER_SPACE_RUN = 0.05  # a single space joins the word after it
_PER_BREAK = 1.0
_PER_ESCAPE = 2.5  # beyond what its six characters already count
_PER_CJK = 1.0
_PER_OTHER = 0.5
# Role markers and separators a provider adds around each message / content block.
BLOCK_OVERHEAD: Final = 4


def estimate_text(text: str) -> int:
    """Estimated tokens of ``text`` (0 for the empty string, at least 1 otherwise)."""
    if not text:
        return 0
    if text.isascii():
        return _estimate_ascii(text.encode("ascii"))
    return _estimate_any(text)


# The ASCII classes of the patterns above, as byte tables: ``bytes.translate`` counts a class in
# one C pass (deleting it and comparing lengths) or splits text at it, where ``findall`` builds a
# string per match (~80 µs for a KiB of prose, ~10 this way). ``\s`` of a ``str`` pattern holds
# \x1c-\x1f too, which ``bytes.split()`` would not split at: every table is explicit.
_ASCII_LETTERS: Final = bytes(range(ord("A"), ord("Z") + 1)) + bytes(range(ord("a"), ord("z") + 1))
_ASCII_DIGITS: Final = b"0123456789"
_ASCII_PUNCT: Final = bytes(c for c in range(128) if _PUNCT.match(chr(c)))
_ASCII_SPACE: Final = bytes(c for c in range(128) if _SPACE_RUNS.match(chr(c)))


def _runs_of(chars: bytes) -> bytes:
    """A table that maps ``chars`` to ``x`` and everything else to a space: the mapped text's
    ``split()`` is then the maximal runs of ``chars``."""
    return bytes(ord("x") if c in chars else ord(" ") for c in range(256))


_LETTER_RUNS: Final = _runs_of(_ASCII_LETTERS)
_SPACE_CHAR_RUNS: Final = _runs_of(_ASCII_SPACE)
_BLANK_RUNS: Final = _runs_of(b" ")
_LINE_BREAK_RUNS: Final = _runs_of(b"\t\r\n")


def _estimate_ascii(data: bytes) -> int:
    """:func:`_estimate_any` of ASCII text, the same figure from byte tables."""
    n = len(data)
    letters = n - len(data.translate(None, _ASCII_LETTERS))
    words = len(data.translate(_LETTER_RUNS).split()) if letters else 0
    digits = n - len(data.translate(None, _ASCII_DIGITS))
    punct = n - len(data.translate(None, _ASCII_PUNCT))
    space_runs = len(data.translate(_SPACE_CHAR_RUNS).split())
    space_chars = n - len(data.translate(None, _ASCII_SPACE))
    total = (
        letters * _PER_LETTER
        + words * _PER_WORD
        + digits * _PER_DIGIT
        + punct * _PER_PUNCT
        + space_runs * _PER_SPACE_RUN
    )
    if space_chars > space_runs or b"\t" in data or b"\n" in data:
        # _BREAKS' two alternatives take disjoint characters: its matches are the maximal runs
        # of tabs and line breaks, and those of two spaces or more.
        blanks = sum(1 for run in data.translate(_BLANK_RUNS).split() if len(run) > 1)
        total += (len(data.translate(_LINE_BREAK_RUNS).split()) + blanks) * _PER_BREAK
    if b"\\u" in data:
        total += len(_ESCAPES.findall(data.decode("ascii"))) * _PER_ESCAPE
    return max(1, round(total))


def _estimate_any(text: str) -> int:
    """The estimate of any non-empty text, class by class with the patterns above."""
    n = len(text)
    letters = len(_LETTERS.findall(text))
    words = len(_WORDS.findall(text)) if letters else 0
    digits = len(_DIGITS.findall(text))
    punct = len(_PUNCT.findall(text))
    spaces = _SPACE_RUNS.findall(text)
    space_chars = sum(len(s) for s in spaces)
    total = (
        letters * _PER_LETTER
        + words * _PER_WORD
        + digits * _PER_DIGIT
        + punct * _PER_PUNCT
        + len(spaces) * _PER_SPACE_RUN
    )
    if space_chars > len(spaces) or "\t" in text or "\n" in text:
        total += len(_BREAKS.findall(text)) * _PER_BREAK
    if "\\u" in text:
        total += len(_ESCAPES.findall(text)) * _PER_ESCAPE
    rest = n - letters - digits - punct - space_chars
    if rest > 0 and not text.isascii():
        cjk = len(_CJK.findall(text))
        wide = len(_WIDE_PUNCT.findall(text))
        total += cjk * _PER_CJK + wide * _PER_CJK + (rest - cjk - wide) * _PER_OTHER
    return max(1, round(total))


def _block(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return estimate_text(block.text)
    if isinstance(block, ToolCallBlock):
        return estimate_text(block.name) + estimate_text(json.dumps(block.arguments))
    if isinstance(block, ToolResultBlock):
        return 2 + sum(_block(c) for c in block.content)
    if isinstance(block, JsonBlock):
        data = json.dumps(block.data, default=str, ensure_ascii=False)
        return estimate_text(block.summary or "") + estimate_text(data)
    if isinstance(block, ArtifactRefBlock):
        return 16 + estimate_text(block.summary or "")
    return 64  # an attachment: providers bill images by size; a floor keeps budgets honest


def estimate_blocks(blocks: Sequence[ContentBlock]) -> int:
    """Estimated tokens of a node's content blocks, with each block's framing."""
    if not blocks:
        return 0
    return sum(_block(b) for b in blocks) + BLOCK_OVERHEAD


class _NodeCosts:
    """The estimates of nodes written without one, per node object.

    Writers record a node's estimate with it (``token_count``); older rows, imported sessions and
    nodes appended directly lack it, and a history of thousands of them was estimated again at
    every context build, compaction plan and pin choice — a CPU-second on the worker's loop for
    a 2,500-node session's first compaction. Nodes never change once written, and the run-worker
    keeps a session's node objects between runs; an entry is used only for the very node object
    it was made from (as the builder's message cache does).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        # A plain dict dropping its oldest entry, not ``agent_core.recent.Recent``: this is read
        # once per node of every context build (thousands), where a method call and a reorder
        # per read cost 0.15-0.2 ms a 2,000-node build (``bench/context.py``, side by side).
        self._entries: OrderedDict[str, tuple[Node, int]] = OrderedDict()

    def of(self, node: Node) -> int:
        """``node``'s recorded estimate, else its content's (computed once per node object)."""
        if node.token_count is not None:
            return node.token_count
        entry = self._entries.get(node.node_id)
        if entry is not None and entry[0] is node:
            return entry[1]
        cost = estimate_blocks(node.content)
        self._entries[node.node_id] = (node, cost)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return cost


node_tokens = _NodeCosts(50_000).of


def estimate_tools(tools: Sequence[ToolDefinition]) -> int:
    """Estimated tokens of the tool definitions a request offers (their JSON schemas)."""
    return sum(
        estimate_text(t.name)
        + estimate_text(t.description or "")
        + estimate_text(json.dumps(t.input_schema))
        + BLOCK_OVERHEAD
        for t in tools
    )


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """A model's context window and the longest answer it may be asked for (tokens)."""

    context_window: int
    max_output_tokens: int


# Defaults for common models, matched by name prefix (longest prefix wins); a model's config
# (``context_window``, ``max_output_tokens``) overrides them.
_KNOWN: Final[dict[str, ModelLimits]] = {
    "gpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4.1": ModelLimits(1_047_576, 32_768),
    "gpt-4-turbo": ModelLimits(128_000, 4_096),
    "gpt-4": ModelLimits(8_192, 4_096),
    "gpt-3.5-turbo": ModelLimits(16_385, 4_096),
    "gpt-5": ModelLimits(400_000, 128_000),
    "o1": ModelLimits(200_000, 100_000),
    "o3": ModelLimits(200_000, 100_000),
    "o4-mini": ModelLimits(200_000, 100_000),
    "claude-3-5": ModelLimits(200_000, 8_192),
    "claude-3-7": ModelLimits(200_000, 64_000),
    "claude-3": ModelLimits(200_000, 4_096),
    "claude-sonnet-4": ModelLimits(200_000, 64_000),
    "claude-opus-4": ModelLimits(200_000, 32_000),
    "claude-haiku-4": ModelLimits(200_000, 64_000),
    "llama3.1": ModelLimits(131_072, 4_096),
    "llama3.2": ModelLimits(131_072, 4_096),
    "llama3": ModelLimits(8_192, 2_048),
    "qwen2.5": ModelLimits(32_768, 8_192),
    "qwen3": ModelLimits(40_960, 8_192),
    "mistral": ModelLimits(32_768, 4_096),
    "gemma": ModelLimits(8_192, 2_048),
    "deepseek": ModelLimits(65_536, 8_192),
}
# A model nobody told us about (often a local server's: vLLM, llama.cpp); a smaller real window
# shows as the provider's overflow error, which compacts and retries.
DEFAULT_LIMITS: Final = ModelLimits(32_768, 4_096)


def model_limits(
    model: str, *, context_window: int | None = None, max_output_tokens: int | None = None
) -> ModelLimits:
    """The limits of ``model``: the configured values where given, else the table's (by the
    longest matching name prefix, ignoring a provider prefix such as ``openai/``), else
    :data:`DEFAULT_LIMITS`. The output limit never exceeds half the window."""
    name = model.rsplit("/", 1)[-1].lower()
    known = max(
        ((p, lim) for p, lim in _KNOWN.items() if name.startswith(p)),
        key=lambda item: len(item[0]),
        default=(None, DEFAULT_LIMITS),
    )[1]
    window = context_window or known.context_window
    output = max_output_tokens or known.max_output_tokens
    return ModelLimits(window, min(output, window // 2))


class Calibration:
    """The ratio of provider-reported prompt tokens to our estimate, per (session, model).

    Exponentially smoothed so one odd response does not swing the budget. A sample outside
    [``LOW``, ``HIGH``] is ignored, not clamped: a report that far off is not a tokenizer's
    difference but a count of something else — Ollama's ``prompt_eval_count`` counts only the
    tokens it did not have cached, so a long conversation reports a few dozen — and taking it
    would make the budget trust prompts that overflow. Process-wide: a worker keeps it across the
    runs of a session it serves.
    """

    ALPHA: Final = 0.5
    LOW: Final = 0.5
    HIGH: Final = 3.0
    _MAX_KEYS: Final = 10_000

    def __init__(self) -> None:
        self._ratios: dict[tuple[str, str], float] = {}

    def ratio(self, session_id: str, model: str) -> float:
        """The smoothed ratio (1.0 before any report)."""
        return self._ratios.get((session_id, model), 1.0)

    def observe(self, session_id: str, model: str, *, estimated: int, reported: int) -> float:
        """Fold one response's reported prompt tokens in; returns the new ratio. Reports of
        nothing (a provider that sends no usage) are ignored."""
        key = (session_id, model)
        if estimated <= 0 or reported <= 0:
            return self._ratios.get(key, 1.0)
        sample = reported / estimated
        old = self._ratios.get(key)
        if not self.LOW <= sample <= self.HIGH:
            return old if old is not None else 1.0
        new = sample if old is None else old + self.ALPHA * (sample - old)
        if old is None and len(self._ratios) >= self._MAX_KEYS:
            self._ratios.pop(next(iter(self._ratios)))
        self._ratios[key] = new
        return new


CALIBRATION = Calibration()


class LearnedWindows:
    """Context windows a provider revealed in an overflow error, per (provider, address, model),
    kept for the life of the process: a run after the one that learned it starts with a request
    that fits, instead of failing once to learn the same thing again.

    Only ever smaller than what the configuration says: the server's own answer is the truth
    about its window. Not shared between processes (each worker learns on its first overflow).
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, str | None, str], int] = {}

    @staticmethod
    def _key(provider: str, base_url: str | None, model: str) -> tuple[str, str | None, str]:
        return provider, base_url, model

    def learn(self, provider: str, base_url: str | None, model: str, window: int) -> None:
        """Remember ``window`` for the model (the smallest one seen wins)."""
        key = self._key(provider, base_url, model)
        self._known[key] = min(window, self._known.get(key, window))

    def window(self, provider: str, base_url: str | None, model: str) -> int | None:
        """The window learned for the model, if any."""
        return self._known.get(self._key(provider, base_url, model))

    def clear(self) -> None:
        """Forget every learned window (tests that share a process and a fake model's name)."""
        self._known.clear()


WINDOWS = LearnedWindows()
"""The process's calibration table."""
