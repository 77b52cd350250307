"""A model's update batch passes the rules' privacy, support and supersession checks."""

from __future__ import annotations

from agent_core.memory import MemoryUpdateBatch, UpdateOp, parse_document
from agent_core.memory.guards import vet_batch

DOCS = {
    "user": parse_document(
        "- Show two decimal places <!-- id:u1 slot:decimals=2 -->\n- Reply in English\n",
        scope="user",
    )
}


def _vet(*updates: dict[str, object], said: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    batch = MemoryUpdateBatch.model_validate({"updates": list(updates)})
    kept, refused = vet_batch(batch, DOCS, [said])
    return [(str(u.op), u.entry_id) for u in kept.updates], [r.note or "" for r in refused]


def test_llm_output_with_a_secret_is_refused() -> None:
    kept, refused = _vet(
        {"op": "add", "scope": "user", "text": "Card 4000 1234 5678 9010 is for travel"},
        said="Remember my card 4000 1234 5678 9010 for travel",
    )
    assert kept == [] and refused == ["contains pii"]


def test_llm_output_left_talking_about_a_secret_is_refused() -> None:
    kept, refused = _vet(
        {"op": "add", "scope": "user", "text": "Use the card for travel bookings"},
        said="Remember my card 4000 1234 5678 9010, use the card for travel bookings",
    )
    assert kept == [] and refused == ["contains pii"]


def test_llm_output_the_user_never_said_is_refused() -> None:
    kept, refused = _vet(
        {"op": "add", "scope": "user", "text": "The user is a software engineer at Google"},
        said="Pull the Q3 numbers please",
    )
    assert kept == [] and refused == ["unsupported"]


def test_llm_output_adding_a_held_slot_becomes_an_update_of_it() -> None:
    kept, _ = _vet(
        {"op": "add", "scope": "user", "text": "One decimal from now on", "slot": "decimals=1"},
        said="One decimal from now on",
    )
    assert kept == [("update", "u1")]


def test_llm_output_restating_an_entry_is_none() -> None:
    kept, _ = _vet(
        {"op": "add", "scope": "user", "text": "Always two decimal places"},
        {"op": "update", "scope": "user", "entry_id": "u2", "text": "Always reply in English"},
        said="Always two decimal places. Always reply in English.",
    )
    assert [op for op, _ in kept] == [UpdateOp.NONE, UpdateOp.NONE]


def test_llm_output_a_real_change_passes() -> None:
    kept, refused = _vet(
        {"op": "update", "scope": "user", "entry_id": "u2", "text": "以后用中文回复"},
        said="以后用中文回复。",
    )
    assert kept == [("update", "u2")] and refused == []


def test_llm_output_replacing_a_value_drops_the_clause_naming_the_old_one() -> None:
    batch = MemoryUpdateBatch.model_validate(
        {
            "updates": [
                {
                    "op": "add",
                    "scope": "user",
                    "text": "以后保留一位小数，两位小数太细了",
                    "slot": "decimals=1",
                }
            ]
        }
    )
    kept, refused = vet_batch(batch, DOCS, ["以后保留一位小数，两位小数太细了"])
    assert refused == []
    [u] = kept.updates
    assert (u.op, u.entry_id, u.text) == (UpdateOp.UPDATE, "u1", "以后保留一位小数")
