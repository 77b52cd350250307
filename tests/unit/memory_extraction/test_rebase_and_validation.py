"""Re-basing a model's batch onto edited files, and validating what the model answered."""

from __future__ import annotations

import pytest

from agent_core.memory import MemoryUpdateBatch, UpdateOp, parse_document
from services.memory_extraction.llm import ProposalError, parse_batch
from services.memory_extraction.rebase import rebase

BEFORE = {"user": parse_document("- A <!-- id:u1 -->\n- B <!-- id:u2 -->\n", scope="user")}


def batch(*updates: dict[str, object]) -> MemoryUpdateBatch:
    return MemoryUpdateBatch.model_validate({"updates": list(updates)})


def test_update_of_an_entry_the_user_edited_is_dropped() -> None:
    fresh = {"user": parse_document("- A2 <!-- id:u1 -->\n- B <!-- id:u2 -->\n", scope="user")}
    out, dropped = rebase(
        batch(
            {"op": "update", "scope": "user", "entry_id": "u1", "text": "model"},
            {"op": "update", "scope": "user", "entry_id": "u2", "text": "B2"},
        ),
        BEFORE,
        fresh,
    )
    assert [(u.entry_id, u.text) for u in out.updates] == [("u2", "B2")]
    assert [(d.entry_id, d.note) for d in dropped] == [("u1", "user edit wins")]


def test_delete_of_an_entry_the_user_removed_is_dropped() -> None:
    fresh = {"user": parse_document("- B <!-- id:u2 -->\n", scope="user")}
    out, dropped = rebase(batch({"op": "delete", "scope": "user", "entry_id": "u1"}), BEFORE, fresh)
    assert out.updates == [] and len(dropped) == 1


def test_a_colliding_add_id_is_renamed_and_later_references_follow() -> None:
    fresh = {
        "user": parse_document(
            "- A <!-- id:u1 -->\n- B <!-- id:u2 -->\n- C <!-- id:u3 -->\n", scope="user"
        )
    }
    out, dropped = rebase(
        batch(
            {"op": "add", "scope": "user", "entry_id": "u3", "text": "new"},
            {"op": "update", "scope": "user", "entry_id": "u3", "text": "newer"},
            {"op": "add", "scope": "user", "text": "other"},
        ),
        BEFORE,
        fresh,
    )
    ids = [u.entry_id for u in out.updates]
    assert ids[0] == ids[1] not in ("u1", "u2", "u3")
    assert ids[2] not in ("u1", "u2", "u3", ids[0])
    assert dropped == []


def test_parse_batch_accepts_fenced_json_and_checks_scopes_and_ids() -> None:
    text = (
        '```json\n{"updates": [{"op": "add", "scope": "user", "entry_id": "u9", "text": "x"},'
        ' {"op": "update", "scope": "user", "entry_id": "u9", "text": "y"}]}\n```'
    )
    ok = parse_batch(text, BEFORE, ["user"])
    assert [u.op for u in ok.updates] == [UpdateOp.ADD, UpdateOp.UPDATE]
    with pytest.raises(ProposalError):
        parse_batch(
            '{"updates": [{"op": "add", "scope": "skill:x", "text": "x"}]}', BEFORE, ["user"]
        )
    with pytest.raises(ProposalError):
        parse_batch(
            '{"updates": [{"op": "delete", "scope": "user", "entry_id": "u7"}]}', BEFORE, ["user"]
        )
    with pytest.raises(ProposalError):
        parse_batch("no json here", BEFORE, ["user"])
    with pytest.raises(ProposalError):
        parse_batch('{"updates": [{"op": "rewrite", "scope": "user"}]}', BEFORE, ["user"])
