"""The two interaction shapes of issue 37: skills as objects, transcript-style tool calls."""

import json

from agent_core.bus.contracts.memory import Interaction as BusInteraction
from agent_core.memory import Interaction, SignalKind, detect_signals
from services.memory_extraction.service import to_batch_item

_TRANSCRIPT = {
    "turns": [
        {"role": "user", "content": "Export the sheet."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "excel_write", "arguments": {"sheet": "x" * 40}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "tool_name": "excel_write",
            "content": "sheet name must be at most 31 characters",
            "is_error": True,
        },
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c2", "name": "excel_write", "arguments": {"sheet": "Summary"}}],
        },
        {"role": "tool", "tool_call_id": "c2", "tool_name": "excel_write", "content": "ok"},
    ],
    "skills": [{"name": "excel", "description": "Reads and writes Excel workbooks (excel_write)."}],
}


def test_transcript_calls_are_paired_to_their_results() -> None:
    ix = Interaction.model_validate_json(json.dumps(_TRANSCRIPT))
    tools = [t for t in ix.turns if t.role == "tool"]
    assert [t.arguments for t in tools] == [{"sheet": "x" * 40}, {"sheet": "Summary"}]
    assert ix.skills == ["excel"]
    assert ix.descriptions() == {"excel": "Reads and writes Excel workbooks (excel_write)."}
    (lesson,) = [s for s in detect_signals(ix) if s.kind is SignalKind.TOOL_LESSON]
    assert "31" in lesson.text and lesson.scope == "skill:excel"


def test_the_old_shape_and_bare_skill_names_still_read() -> None:
    ix = Interaction.model_validate(
        {
            "turns": [{"role": "tool", "tool_name": "t", "arguments": {"a": 1}, "content": "ok"}],
            "skills": ["excel"],
        }
    )
    assert ix.turns[0].arguments == {"a": 1} and ix.skills == ["excel"] and ix.skill_info == []


def test_the_bus_contract_carries_both_shapes_to_the_pipeline() -> None:
    message = BusInteraction.model_validate(
        {"interaction_id": "i", "account_id": "a", "session_id": "s", "run_id": "r", **_TRANSCRIPT}
    )
    ix = to_batch_item(message).interaction
    assert ix.descriptions()["excel"].startswith("Reads and writes")
    assert [t.arguments for t in ix.turns if t.role == "tool"][1] == {"sheet": "Summary"}
