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
from agent_core.memory.signals import bounded

__all__ = ["INPUT_MARKER", "SYSTEM_PROMPT", "allowed_scopes", "build_input", "user_words"]

INPUT_MARKER = "INPUT JSON:"

SYSTEM_PROMPT = """\
You maintain a user's long-term memory for an agent: short Markdown bullets, the current truth only.
You receive the existing memory (entries with ids, per scope) and recent interactions: the user's
own words and candidate statements a detector flagged. Decide what to change.

Remember:
- durable preferences and rules ("from now on", "always", "以后", "默认", "in every report");
- facts about the user, their team, business and data, even without a marker word ("I'm the
  finance partner for APAC, so unless I say otherwise …", "our fiscal year starts in July",
  "the customer table is core.dim_customer");
- corrections of how output should look or be made ("don't pivot it, keep long format",
  "I told you: no merged cells");
- tool lessons: a failed call followed by a changed call that succeeded (the change is the lesson).

Do not remember ("none"):
- questions, hypotheticals, quotations and reported speech ("the docs say …", 老板说“…”);
- anything about this output only: this time, this one, this file, for now, 这次, 这份, 这张,
  "remember to attach this one as PNG", and corrections of this output ("that's wrong, I meant
  Q3", "不对，是第四列");
- marker characters inside ordinary words: 固定资产, 统一社会信用代码 are not 固定/统一;
- an identical retry that then worked, a fix that came from the user, a change of file path only.

Read a sentence with its neighbours in the same user turn:
- a short sentence that only makes another durable ("Every time.", "Always.", "Don't make me say
  it twice.", "以后都照这个来", "别再弄错了") belongs to its neighbour: write the neighbour's rule,
  never the marker sentence; drop "Please remember:" / "请记住：" in front of a rule;
- when the user approves what the agent just did and makes it general ("do it like that every
  time", "make that the default", "以后就照这个格式出"), the rule is the change the agent described
  or the changed call (a candidate carries it), never the user's complaint about the symptom;
- "记得…" / "Remember to …" for the current task is a reminder, not a memory; 从现在起, 今后,
  往后, 打今儿起 mark a standing rule; 又, 还是没, 仍然不对, again, still wrong mark a failure seen
  before: the rule said next to them is durable, the complaint is not an entry; a deictic
  ("这一列", "this column") in the complaint does not cancel a general rule said beside it.

Supersession: one entry per preference (its slot: date format, decimals, currency, units, reply
language, chart type, palette, summary position, week start, time zone, …), in any language. When
a new value replaces an old one, "update" the old entry in place so the old value is gone; never
keep both. The same holds without a slot: a new value for the same thing (a definition's window,
a name on an invoice, a threshold, a font, a sort key), in any word order ("Sixty days is the
window now", "按毛利从高到低，这才是默认排序"), updates the entry about it. A candidate of kind
"revision" only ever updates such an entry; with none to update it is "none". Something already
present, in any wording or language, is "none", not a second "add".
"delete" an entry when the user asks to forget it or says it no longer holds.

Privacy: never write secrets or personal identifiers (API keys, passwords, PINs, tokens,
credentials in URLs, ID, passport, employee, account and card numbers — with or without spaces —
phone numbers, e-mail and home addresses). When a sentence asks to remember one of these, the
rest of that sentence is about it and is not written either — its purpose, convenience or
permission ("so you can use it next time", "方便你下回自己登录", "you may log in as me") goes too;
keep only a separate preference that stands on its own.

Tool lessons: say what to change; for invalid JSON, name the cause the error gives (an unescaped
newline, a trailing comma, single quotes), not only "send valid JSON".

Write each entry in the language the user used, as one short sentence, from the user's own words
(no claim they did not make). Scope: "user" for cross-cutting preferences and facts;
"skill:<name>" when the statement is about that enabled skill's artefact, tools or process (an
export format, a chart setting, a cleaning step, a SQL table), also when the interaction names the
skill. Judge a skill by its name and its description ("skill_descriptions"), in either language;
a follow-up that names no artefact belongs to the skill its interaction used, or to the scope of
the entry it revises. Use only the scopes listed in "scopes". Assistant text is never evidence,
except for the change a user approves and makes general (above).

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


def user_words(interaction: Interaction) -> list[str]:
    """The user's turns of ``interaction``, scrubbed, without the injected memory block."""
    # The injected memory block is cut out: the model must not re-learn its own input.
    return [
        scrub_text(MEMORY_BLOCK.sub("\n", t.content)).strip()
        for t in bounded(interaction).turns
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


def _descriptions(interaction: Interaction) -> dict[str, dict[str, str]]:
    """The enabled skills' descriptions (scrubbed), when the interaction carried any."""
    described = {n: scrub_text(d)[:300] for n, d in interaction.descriptions().items() if d}
    return {"skill_descriptions": described} if described else {}


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
                **_descriptions(ix),
                "user": user_words(ix),
                "candidates": [_candidate(s) for s in signals],
            }
            for i, (ix, signals) in enumerate(batch)
        ],
    }
    return INPUT_MARKER + "\n" + json.dumps(payload, ensure_ascii=False, indent=1)
