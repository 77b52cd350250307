"""Text helpers shared by the memory modules: normalization, language, splitting, overlap."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final, Literal

__all__ = [
    "Language",
    "containment",
    "detect_language",
    "feature_set",
    "normalize",
    "split_clauses",
    "split_sentences",
]

Language = Literal["zh", "en"]

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_DROP = re.compile(r"[\s\W_]+", re.UNICODE)
# A sentence ends at CJK terminal punctuation, a newline, or ./?/! followed by a space or
# the end of the text (so "1.5", "dw.sales_fact" and a password like "Qw!2024" stay whole).
_SENTENCE_END = re.compile(r"(?<=[。！？\n])|(?<=[.!?])(?=\s|$)")
_CLAUSE_SEP = re.compile(r"[，,；;]|\s[—–-]{1,2}\s|——")
_EN_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "and",
        "or",
        "is",
        "are",
        "be",
        "it",
        "this",
        "that",
        "with",
        "as",
        "by",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "please",
        "just",
        "so",
        "also",
        "use",
        # Words that frame an instruction rather than carry it: two wordings of one rule differ
        # mostly here ("put X at the very end, every time" / "X should always go at the end").
        "put",
        "very",
        "every",
        "time",
        "always",
        "should",
        "make",
        "sure",
        "like",
        "said",
        "before",
        "again",
        "from",
        "now",
        "going",
        "forward",
        "remember",
        "default",
        "each",
        "all",
        "when",
        "then",
        "will",
        "would",
        "could",
        "can",
        "want",
        "do",
        "does",
        "go",
        "goes",
    ]
)


# normalize and feature_set are pure and their results immutable: each consolidation and render
# asks again for the same entries' keys (every entry's hash at every render), so they are kept.
_CACHED: Final = 4096


@functools.lru_cache(maxsize=_CACHED)
def normalize(text: str) -> str:
    """NFKC, casefold, and drop whitespace and punctuation: the dedup and matching key.

    Keeps ``#``, ``&``, ``/`` and ``-`` because they carry meaning in formats and values
    ("#1F4E79", "FP&A", "YYYY/MM/DD" vs "YYYY-MM-DD").
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    kept = re.sub(r"[#&/\-]", lambda m: "\x00" + m.group(0), text)
    out = _DROP.sub(lambda m: "".join(c for c in m.group(0) if c in "#&/-"), kept)
    return out.replace("\x00", "")


def detect_language(text: str) -> Language:
    """``zh`` when CJK characters outnumber Latin words (a CJK char ≈ a word), else ``en``."""
    cjk = len(_CJK.findall(text))
    words = len(_LATIN_WORD.findall(text))
    return "zh" if cjk and cjk >= words else "en"


def split_sentences(text: str) -> list[str]:
    """Split text into trimmed, non-empty sentences."""
    parts = _SENTENCE_END.split(text)
    return [p.strip() for p in parts if p and p.strip()]


def split_clauses(sentence: str) -> list[str]:
    """Split a sentence at commas, semicolons and dashes into trimmed, non-empty clauses."""
    return [c.strip(" 。.!?！？") for c in _CLAUSE_SEP.split(sentence) if c.strip(" 。.!?！？")]


@functools.lru_cache(maxsize=_CACHED)
def feature_set(text: str) -> frozenset[str]:
    """Content features for overlap: CJK character bigrams plus Latin/number words minus stopwords."""
    text = unicodedata.normalize("NFKC", text).casefold()
    feats: set[str] = set()
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        feats.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    for word in re.findall(r"[a-z0-9#&_]+", text):
        if word not in _EN_STOP:
            feats.add(_stem(word))
    return frozenset(feats)


def _stem(word: str) -> str:
    """A plural and its singular are one feature ("reports"/"report", "steps"/"step")."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-3] + "y" if word.endswith("ies") else word[:-1]
    return word


def containment(part: str, whole: str) -> float:
    """Share of ``part``'s content features found in ``whole`` (0.0 when ``part`` has none)."""
    a, b = feature_set(part), feature_set(whole)
    return len(a & b) / len(a) if a else 0.0
