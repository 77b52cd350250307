"""The fakes' prompt-token count: what a fake provider reports as ``prompt_tokens``.

THIS IS A MODEL, NOT A TOKENIZER: no tokenizer vocabulary is available offline. It follows how
BPE tokenizers of current models cut text — a GPT-style pre-tokenizer (a word with its leading
space, digits in threes, punctuation runs, whitespace runs) and then a cost per piece: a word of
up to seven letters is one token, a longer one a token per four letters, a punctuation run a
token per two characters, a CJK character one token, other non-ASCII letters one per two. It is
deliberately a different algorithm from the runtime's per-character-class estimate
(``agent_core.context.tokens``), so the estimate's error against it means something.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

__all__ = ["count_request", "count_text"]

_PIECES = re.compile(
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# Per message: role markers and separators; per request: the reply's priming.
PER_MESSAGE = 4
PER_REQUEST = 3


# A fake counts every request whole, and a long session's requests repeat its history: each text
# is cut into pieces once (the count is a function of the text alone).
@functools.lru_cache(maxsize=16_384)
def count_text(text: str) -> int:
    """Tokens of ``text`` under the model above."""
    tokens = 0
    for piece in _PIECES.findall(text):
        core = piece.strip()
        if not core or core[0].isdigit():
            tokens += 1
        elif core[0].isalpha() or core[0] == "_":
            cjk = len(_CJK.findall(core))
            if cjk:
                tokens += cjk + math.ceil((len(core) - cjk) / 2)
            elif core.isascii():
                tokens += 1 if len(core) <= 7 else math.ceil(len(core) / 4)
            else:
                tokens += math.ceil(len(core) / 2)
        else:
            tokens += math.ceil(len(core) / 2)
    return tokens


def count_request(body: Any) -> int:
    """Prompt tokens of a provider request body (any of the three wire shapes): every string
    value counted, plus each message's and the request's framing; tool definitions counted as
    their JSON text (keys included: a provider renders the schema as text). Other keys, the model
    name and numeric options are not prompt text."""
    tokens = PER_REQUEST

    def walk(value: Any, key: str = "") -> None:
        nonlocal tokens
        if isinstance(value, str):
            if key not in {"model", "type", "role", "id", "tool_call_id", "tool_use_id"}:
                tokens += count_text(value)
        elif isinstance(value, dict):
            tools = value.get("tools")
            if key == "" and isinstance(tools, list):  # tool schemas are read as JSON text,
                tokens += sum(count_text(json.dumps(t)) for t in tools)  # keys and all
                value = {k: v for k, v in value.items() if k != "tools"}
            if "role" in value:
                tokens += PER_MESSAGE
            for k, v in value.items():
                if k not in {"stream", "stream_options", "options", "max_tokens", "keep_alive"}:
                    walk(v, k)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)

    walk(body)
    return tokens
