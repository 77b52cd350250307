"""Reading the account-level search index: a user's query as an FTS5 expression, and the
snippet a result shows (the index itself and how it is written: ``search_index``).

Both the SQLite query engine (``queries``) and PostgreSQL's (``backends.pg_store``, which makes
snippets the same way over its own full-text search) use these.
"""

from __future__ import annotations

import re
from typing import Final

from services.storage_writer.search_index import scope_token

__all__ = ["match_expression", "snippet"]

# The words of a query that are matched (more add nothing but cost).
_MAX_TERMS: Final = 12
_WORD = re.compile(r"\w+", re.UNICODE)


def match_expression(account_id: str, query: str) -> str | None:
    """The FTS5 expression for a user's query within one account, or ``None`` if it has no word.

    Each word is matched as a quoted string (so no user text is ever FTS5 syntax), all words
    must occur in the same row, and the last word also matches as a prefix once it has three
    characters (typing "deplo" finds "deploy")."""
    words = _WORD.findall(query)[:_MAX_TERMS]
    if not words:
        return None
    terms = [f'"{w}"' for w in words]
    if len(words[-1]) >= 3:
        terms[-1] += "*"
    return f"scope : {scope_token(account_id)} AND body : ({' AND '.join(terms)})"


_SNIPPET_CHARS: Final = 160


def snippet(body: str, query: str) -> str:
    """Up to ``_SNIPPET_CHARS`` of ``body`` around its first word that a word of ``query``
    starts, with every such word in ``[``…``]`` (made here, not by FTS5's ``snippet()``, which
    would evaluate the whole match again for each result)."""
    wanted = sorted({re.escape(w) for w in _WORD.findall(query)[:_MAX_TERMS]}, key=len)
    if not wanted:
        return body[:_SNIPPET_CHARS]
    pattern = re.compile(r"\b(?:" + "|".join(reversed(wanted)) + r")\w*", re.IGNORECASE)
    first = pattern.search(body)
    start = max(0, first.start() - _SNIPPET_CHARS // 3) if first else 0
    end = min(len(body), start + _SNIPPET_CHARS)
    marked = pattern.sub(lambda m: f"[{m[0]}]", body[start:end])
    return ("…" if start else "") + marked + ("…" if end < len(body) else "")
