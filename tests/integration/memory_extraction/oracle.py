"""A scripted memory model for the fake provider server, answering from the labelled set.

It plays the part of a good consolidation model honestly: it reads the request the service sent
(the JSON after ``INPUT JSON:``), takes entry ids from the memory listed there and entry text
only from the candidates the detector put there, and uses the labels solely for the judgement a
model would make — is this candidate a durable memory, and which existing entry does it replace.
A candidate the labels do not ask for gets ``none``. Whatever the pipeline dropped before the
prompt (a missed statement, a wrong id) therefore costs recall or precision in the score.
"""

from __future__ import annotations

import json
from typing import Any

from agent_core.memory._text import split_clauses
from agent_core.memory.evaluation import EpisodeLabels, ExpectedEntry, entry_matches
from agent_core.memory.slots import detect_slots, slot_template
from services.memory_extraction.prompt import INPUT_MARKER
from tests.fakes.script import ScriptedResponse, text_turn


def _keywords_match(label: ExpectedEntry, text: str) -> bool:
    return entry_matches(label.model_copy(update={"scope": "*"}), "", text)


def _words(label: ExpectedEntry) -> set[str]:
    return {w for kw in label.all for w in ([kw] if isinstance(kw, str) else kw)}


def request_payload(body: Any) -> dict[str, Any]:
    """The service's JSON input inside an OpenAI chat request body."""
    for message in body["messages"]:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        if INPUT_MARKER in text:
            loaded: dict[str, Any] = json.loads(text.split(INPUT_MARKER, 1)[1])
            return loaded
    raise AssertionError("the request holds no memory input")


class Oracle:
    """Decides a batch like a careful model would, with the labels of the current episode."""

    def __init__(self) -> None:
        self.labels = EpisodeLabels()
        self.answers = 0
        self._scopes: list[str] = []
        self._updates: list[dict[str, Any]] = []
        self._next = 100

    def __call__(self, body: Any) -> ScriptedResponse:
        self.answers += 1
        updates = self.decide(request_payload(body))
        return text_turn(json.dumps({"updates": updates}, ensure_ascii=False))

    def decide(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        memory: dict[str, list[dict[str, Any]]] = {s: list(e) for s, e in payload["memory"].items()}
        self._scopes, self._updates, self._next = payload["scopes"], [], 100
        for ix in payload["interactions"]:
            for cand in ix["candidates"]:
                if cand["kind"] == "forget":
                    self._updates += self._forget(memory)
                    continue
                slots = cand["slots"]
                if len(slots) >= 2:  # "one entry per preference", as the prompt asks
                    for slot in slots:
                        key, value = slot.split("=", 1)
                        text = slot_template(key, value, cand["language"])
                        self._one(memory, cand["scope"], text, slot)
                else:
                    self._one(memory, cand["scope"], cand["text"], slots[0] if slots else None)
        return self._updates

    def _labels(self, text: str) -> list[ExpectedEntry]:
        """Labels the statement speaks to: wanted now, or wanted until a later change."""
        durable = [a for a in self.labels.absent if a.kind in ("conflict", "delete")]
        return [la for la in [*self.labels.expected, *durable] if _keywords_match(la, text)]

    def _one(
        self, memory: dict[str, list[dict[str, Any]]], scope: str, text: str, slot: str | None
    ) -> None:
        labels = self._labels(text)
        if not labels:
            self._updates.append({"op": "none", "scope": scope, "reason": "not durable"})
            return
        accepted = labels[0].scopes()
        if scope not in accepted and "*" not in accepted:
            scope = accepted[0]
        if scope not in self._scopes:
            return
        entries = memory.setdefault(scope, [])
        target = self._replaces(labels, scope, entries, slot)
        if target is None:
            taken = {e["id"] for es in memory.values() for e in es}
            while f"o{self._next}" in taken:
                self._next += 1
            entry = {"id": f"o{self._next}", "text": text, "slot": slot}
            entries.append(entry)
            self._updates.append(
                {"op": "add", "scope": scope, "entry_id": entry["id"], "text": text, "slot": slot}
            )
            return
        new_text = self._merge(target["text"], text)
        if new_text != target["text"]:
            target.update(text=new_text, slot=slot or target.get("slot"))
            self._updates.append(
                {
                    "op": "update",
                    "scope": scope,
                    "entry_id": target["id"],
                    "text": new_text,
                    "slot": target.get("slot"),
                }
            )

    def _merge(self, old: str, new: str) -> str:
        """``new`` plus the old entry's clauses that hold something else still wanted."""
        conflicts = [a for a in self.labels.absent if a.kind in ("conflict", "delete")]
        kept = [
            c
            for c in split_clauses(old)
            if any(
                _keywords_match(la, c) and not _keywords_match(la, new)
                for la in self.labels.expected
            )
            and not any(_keywords_match(a, c) for a in conflicts)
        ]
        return "，".join([new, *kept]) if kept else new

    def _replaces(
        self,
        labels: list[ExpectedEntry],
        scope: str,
        entries: list[dict[str, Any]],
        slot: str | None,
    ) -> dict[str, Any] | None:
        """The existing entry this statement restates or replaces, if any."""
        for e in entries:
            if any(entry_matches(la, scope, e["text"]) for la in labels):
                return e
        key = slot.split("=", 1)[0] if slot else None
        for e in entries:
            keys = {(e.get("slot") or "").split("=", 1)[0]} | {
                m.key for m in detect_slots(e["text"])
            }
            if key and key in keys:
                return e
        words = set().union(*(_words(la) for la in labels))
        for absent in self.labels.absent:
            if absent.kind == "conflict" and _words(absent) & words:
                for e in entries:
                    if entry_matches(absent, scope, e["text"]):
                        return e
        return None

    def _forget(self, memory: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        out = []
        for absent in self.labels.absent:
            if absent.kind != "delete":
                continue
            for scope, entries in memory.items():
                for e in list(entries):
                    if entry_matches(absent, scope, e["text"]):
                        entries.remove(e)
                        out.append({"op": "delete", "scope": scope, "entry_id": e["id"]})
        return out
