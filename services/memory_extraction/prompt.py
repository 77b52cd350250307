"""The consolidation prompt: instructions, and the batch as one JSON document.

The batch goes to the model as JSON (existing entries with their ids, then per interaction the
user's own words and the detected candidates) so that the model can name entry ids exactly and a
scripted test model can read the same input a real one gets. Everything in it is scrubbed first:
no secret or identifier leaves for the provider either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent_core.memory import Interaction, MemoryDocument, Signal, TurnRole, scrub_text
from agent_core.memory._lexicon import MEMORY_BLOCK
from agent_core.memory.scope import USER_SCOPE, skill_scope

__all__ = ["INPUT_MARKER", "SYSTEM_PROMPT", "allowed_scopes", "build_input"]

INPUT_MARKER = "INPUT JSON:"

SYSTEM_PROMPT = """\
You maintain a user's long-term memory for an agent: short Markdown bullets, the current truth only.
You receive the existing memory (entries with ids, per scope) and recent interactions: the user's
own words and candidate statements a detector flagged. Decide what to change.

Rules:
- Keep only durable preferences, corrections, facts about the user's work and data, and tool
  lessons. Questions, hypotheticals, quotations and requests meant for one output only
  (this time, just this file, 这次, 这份) are not memories: answer "none" for them.
- One entry per preference. When a new value replaces an old one (a date format, decimals,
  currency, units, language, chart type, …), "update" the old entry in place; never keep both.
  Something already present, in any wording, is "none", not a second "add".
- "delete" an entry when the user asks to forget it or says it no longer holds.
- Write each entry in the language the user used, as one short sentence.
- Never write secrets or identifiers: API keys, passwords, tokens, credentials in URLs, ID and
  card numbers, phone numbers. When a sentence mixes a preference and a secret, keep the
  preference only.
- Scope: "user" for cross-cutting preferences and facts; "skill:<name>" when the statement is
  about that enabled skill's artefact or tools. Use only the scopes listed in "scopes".
- Assistant text is never evidence.

Answer with one JSON object and nothing else:
{"updates": [{"op": "add"|"update"|"delete"|"none", "scope": "...", "entry_id": "...",
  "text": "...", "slot": "key=value" or null, "reason": "..."}]}
"add" needs text; "update" needs entry_id (an existing id) and text; "delete" needs entry_id.
"""


def allowed_scopes(
    documents: Mapping[str, MemoryDocument], interactions: Sequence[Interaction]
) -> list[str]:
    """``user``, the scopes that already have a document, and the skills enabled in the batch."""
    scopes = {USER_SCOPE, *documents}
    scopes.update(skill_scope(s) for ix in interactions for s in ix.skills)
    return sorted(scopes)


def _user_words(interaction: Interaction) -> list[str]:
    # The injected memory block is cut out: the model must not re-learn its own input.
    return [
        scrub_text(MEMORY_BLOCK.sub("\n", t.content)).strip()
        for t in interaction.turns
        if t.role is TurnRole.USER and t.content.strip()
    ]


def _candidate(signal: Signal) -> dict[str, Any]:
    return {
        "kind": str(signal.kind),
        "scope": signal.scope,
        "text": signal.text,
        "language": signal.language,
        "slots": [f"{s.key}={s.value}" for s in signal.slots],
    }


def build_input(
    documents: Mapping[str, MemoryDocument],
    batch: Sequence[tuple[Interaction, Sequence[Signal]]],
) -> str:
    """The user message of the consolidation request (instructions are in the system prompt)."""
    payload = {
        "scopes": allowed_scopes(documents, [ix for ix, _ in batch]),
        "memory": {
            scope: [
                {"id": e.id, "text": e.text, **({"slot": e.slot} if e.slot else {})}
                for e in doc.entries
            ]
            for scope, doc in sorted(documents.items())
        },
        "interactions": [
            {
                "index": i,
                "skills": ix.skills,
                "user": _user_words(ix),
                "candidates": [_candidate(s) for s in signals],
            }
            for i, (ix, signals) in enumerate(batch)
        ],
    }
    return INPUT_MARKER + "\n" + json.dumps(payload, ensure_ascii=False, indent=1)
