"""The id field types check natively (patterns) exactly what the one id gate in agent_core.ids
admits: a string is accepted by the field if and only if the gate accepts it."""

from __future__ import annotations

from typing import Any

import pydantic
from hypothesis import given
from hypothesis import strategies as st

from agent_core import ids
from agent_core.errors import AgentCoreError
from agent_core.types import _fields
from agent_core.types import tasks as task_models

# Near misses as well as arbitrary text: the right prefixes, digits of other scripts, newlines,
# look-alike letters, bodies at and past the length bound.
_PIECES = st.sampled_from(
    [
        "node_",
        "run_",
        "sess_",
        "task_",
        "2026",
        "1201",
        "_",
        "a",
        "Z",
        "9",
        "\n",
        "а",
        "٣",
        "-",
        " ",
    ]
)
_NEAR = st.lists(_PIECES | st.text(max_size=3), max_size=30).map("".join)
_CANDIDATES = (
    _NEAR | st.text(max_size=80) | st.builds(lambda n: "node_" + "a" * n, st.integers(0, 70))
)
_SESSION = st.builds(
    lambda d, t, r: f"sess_{d}_{t}_{r}",
    st.text("0123456789٣", min_size=7, max_size=9),
    st.text("0123456789", min_size=5, max_size=7),
    st.text("abcdef0123456789Z", min_size=3, max_size=17),
)


def _accepts(field: Any, value: str) -> bool:
    try:
        pydantic.TypeAdapter(field).validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


def _gate(check: Any, value: str) -> bool:
    try:
        check(value)
    except AgentCoreError:
        return False
    return True


@given(_CANDIDATES)
def test_prefixed_ids_match_the_gate(value: str) -> None:
    for field, prefix in (
        (_fields.NodeId, "node"),
        (_fields.RunId, "run"),
        (task_models.TaskId, "task"),
    ):
        assert _accepts(field, value) == ids.is_valid_id(value, prefix), (prefix, value)


@given(_CANDIDATES | _SESSION)
def test_session_ids_match_the_gate(value: str) -> None:
    expected = _gate(ids.validate_session_id, value)
    assert _accepts(_fields.SessionId, value) == expected, value
    assert _accepts(task_models.SessionId, value) == expected, value


@given(_CANDIDATES)
def test_account_ids_match_the_gate(value: str) -> None:
    assert _accepts(_fields.AccountId, value) == _gate(ids.sanitize_identifier, value), value


def test_a_generated_session_id_passes_both() -> None:
    sid = ids.new_session_id()
    assert _accepts(_fields.SessionId, sid) and _gate(ids.validate_session_id, sid)
