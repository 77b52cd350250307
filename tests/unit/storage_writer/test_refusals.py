"""Refusal codes are one enum: receipts carry only its members, the writer raises only them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_core.bus.contracts.refusals import FENCED, NO_SESSION, Refusal, RefusalCode
from agent_core.bus.contracts.storage import CommandReceipt
from agent_core.ids import new_id
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import claim_run, create_run, create_session

_ROOT = Path(__file__).resolve().parents[3]
_WRITER = _ROOT / "services" / "storage_writer"


def test_an_unknown_refusal_code_does_not_validate() -> None:
    raw = {
        "type": "command_receipt",
        "command_id": "cmd_x",
        "ok": False,
        "error": {"type": "storage_error", "code": "no_such_refusal", "message": "m"},
    }
    with pytest.raises(ValidationError):
        CommandReceipt.model_validate(raw)
    raw["error"]["code"] = "stale_attempt"  # type: ignore[index]
    receipt = CommandReceipt.model_validate(raw)
    assert receipt.error is not None and receipt.error.code is RefusalCode.STALE_ATTEMPT


def test_the_fenced_and_no_session_subsets_are_members() -> None:
    assert {"stale_attempt", "unclaimed_attempt"} == FENCED
    assert {"session_not_found", "invalid_session_id", "invalid_identifier"} == NO_SESSION
    assert all(isinstance(code, RefusalCode) for code in FENCED | NO_SESSION)


def test_a_refused_command_carries_its_typed_code_through_json(writer: Writer) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run])
    stale = claim_run(s, run.run_id)
    first, second = writer.apply_batch(
        [stale, stale.model_copy(update={"command_id": new_id("cmd")})]
    )
    assert first.ok and not second.ok
    assert second.error is not None and second.error.code in FENCED
    again = CommandReceipt.model_validate_json(second.model_dump_json())
    assert isinstance(again.error, Refusal) and again.error.code is RefusalCode.STALE_ATTEMPT


def test_a_hostile_session_id_is_refused_with_a_member_code(writer: Writer) -> None:
    s = create_session().model_copy(update={"session_id": "sess_../../etc"})
    [receipt] = writer.apply_batch([s])
    assert not receipt.ok and receipt.error is not None
    assert receipt.error.code in NO_SESSION


def _codes_raised(path: Path) -> list[tuple[int, str]]:
    """(line, code source) of the first argument of every ``refusal(…)``/``*Error(…)`` call."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name == "refusal" or name.endswith("Error") and name != "RuntimeError":
            found.append((node.lineno, ast.unparse(node.args[0])))
    return found


def test_the_writer_raises_only_refusal_codes() -> None:
    sources = sorted(_WRITER.glob("*.py"))
    assert len(sources) > 10
    seen = 0
    for path in sources:
        # start-up errors, a backup's reader, the index's process: never a command's receipt
        if path.name in {"lock.py", "shards.py", "backup.py", "index_process.py"}:
            continue
        for line, code in _codes_raised(path):
            seen += 1
            # ``code``: refusal()'s own parameter (typed RefusalCode); ``exc.code``: the writer's
            # _refused, whose Refusal does not validate an unknown code.
            passed_on = code in {"code", "exc.code"}
            assert code.startswith("RefusalCode.") or passed_on, f"{path.name}:{line}"
            if code.startswith("RefusalCode."):
                assert code.removeprefix("RefusalCode.") in RefusalCode.__members__
    assert seen > 20
