"""Hypothesis strategies for content blocks, ids, timestamps and storage rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from agent_core.errors import ErrorPayload, ProviderErrorPayload
from agent_core.types import enums
from agent_core.types.protocol import (
    CONTENT_BLOCKS,
    ArtifactRefBlock,
    AttachmentBlock,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from agent_core.types.runtime import ChildAgentResult
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)

_HEX = "0123456789abcdef"


def prefixed(prefix: str) -> st.SearchStrategy[str]:
    """Ids ``<prefix>_<hex>`` as :func:`agent_core.ids.new_id` makes them."""
    return st.text(_HEX, min_size=16, max_size=16).map(lambda body: f"{prefix}_{body}")


# Hypothesis takes naive bounds and attaches ``timezones`` itself, hence the DTZ001 exemptions.
_LOW = datetime(1971, 1, 1)  # noqa: DTZ001
_HIGH = datetime(2200, 1, 1)  # noqa: DTZ001

session_ids = st.builds(
    lambda dt, suffix: f"sess_{dt:%Y%m%d_%H%M%S}_{suffix}",
    st.datetimes(min_value=_LOW, max_value=_HIGH, timezones=st.just(UTC)),
    st.text(_HEX, min_size=8, max_size=8),
)
account_ids = st.from_regex(r"[A-Za-z0-9_]{1,64}", fullmatch=True)
tool_call_ids = st.text(min_size=1, max_size=128)
texts = st.text(max_size=50)
opt_texts = st.none() | texts

# Aware datetimes in any fixed offset (runtime normalises to UTC); microseconds survive storage.
utc_datetimes = st.builds(
    lambda naive, minutes: naive.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(min_value=_LOW, max_value=_HIGH),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=4)

text_blocks = st.builds(TextBlock, text=texts)
json_blocks = st.one_of(
    st.builds(JsonBlock, data=json_values, summary=opt_texts),
    st.builds(JsonBlock, summary=opt_texts, artifact_id=prefixed("artifact")),
)
artifact_ref_blocks = st.builds(
    ArtifactRefBlock,
    artifact_id=prefixed("artifact"),
    summary=opt_texts,
    mime_type=opt_texts,
    filename=opt_texts,
)
attachment_blocks = st.builds(
    AttachmentBlock,
    path=texts,
    filename=opt_texts,
    mime_type=opt_texts,
    size_bytes=st.none() | st.integers(min_value=0, max_value=2**40),
    artifact_id=st.none() | prefixed("artifact"),
)
tool_call_blocks = st.builds(
    ToolCallBlock,
    id=tool_call_ids,
    name=st.text(min_size=1, max_size=128),
    arguments=json_objects,
)
tool_result_blocks = st.builds(
    ToolResultBlock,
    tool_call_id=tool_call_ids,
    content=st.lists(text_blocks | json_blocks | artifact_ref_blocks, max_size=3),
    is_error=st.booleans(),
)
content_blocks = st.one_of(
    text_blocks,
    json_blocks,
    tool_call_blocks,
    tool_result_blocks,
    artifact_ref_blocks,
    attachment_blocks,
)

usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**9),
    output_tokens=st.integers(0, 10**9),
    cache_read_tokens=st.integers(0, 10**9),
    cache_write_tokens=st.integers(0, 10**9),
    estimated=st.booleans(),
)
error_payloads = st.one_of(
    st.builds(ErrorPayload, type=texts, code=texts, message=texts, details=json_objects),
    st.builds(
        ProviderErrorPayload,
        type=texts,
        code=texts,
        message=texts,
        provider=opt_texts,
        status_code=st.none() | st.integers(100, 599),
    ),
)


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


child_results = st.builds(
    ChildAgentResult,
    agent_id=prefixed("agent"),
    run_id=prefixed("run"),
    status=st.sampled_from(enums.RunStatus),
    end_reason=_opt(st.sampled_from(enums.EndReason)),
    text=texts,
    data=json_values,
    artifact_ids=st.lists(prefixed("artifact"), max_size=3),
    usage=usages,
    turns=st.integers(0, 1000),
    error=_opt(error_payloads),
)


# ---------------------------------------------------------------------------- storage rows
# Rows as SQLite could hold them, built from column values (never through the mappers): JSON text
# in any spacing, SQL NULLs, timestamps with any offset.


def _json_text(value: Any, spaced: bool) -> str:
    if spaced:
        return json.dumps(value, indent=1, ensure_ascii=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_text(values: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    """JSON text of ``values``, compact or spaced."""
    return st.builds(_json_text, values, st.booleans())


def model_json(models: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    """JSON text of pydantic models (as their own serializer writes them)."""
    return models.map(lambda m: m.model_dump_json())


iso_timestamps = utc_datetimes.map(lambda dt: dt.isoformat())
content_json = st.lists(content_blocks, max_size=4).map(
    lambda blocks: json.dumps(
        CONTENT_BLOCKS.dump_python(blocks, mode="json", exclude_none=True), ensure_ascii=False
    )
)

session_records = st.builds(
    SessionRecord,
    session_id=session_ids,
    account_id=account_ids,
    cwd=texts,
    root_agent_id=prefixed("agent"),
    active_node_id=_opt(prefixed("node")),
    parent_session_id=_opt(session_ids),
    status=st.sampled_from(enums.SessionStatus),
    metadata_json=_opt(json_text(json_objects)),
    created_at=iso_timestamps,
    updated_at=iso_timestamps,
)
agent_records = st.builds(
    AgentRecord,
    agent_id=prefixed("agent"),
    session_id=session_ids,
    parent_agent_id=_opt(prefixed("agent")),
    agent_type=st.sampled_from(enums.AgentType),
    created_by_run_id=_opt(prefixed("run")),
    fork_from_node_id=_opt(prefixed("node")),
    status=st.sampled_from(enums.AgentStatus),
    result_json=_opt(model_json(child_results)),
    metadata_json=_opt(json_text(json_objects)),
    created_at=iso_timestamps,
    updated_at=iso_timestamps,
)
run_records = st.builds(
    RunRecord,
    run_id=prefixed("run"),
    session_id=session_ids,
    agent_id=prefixed("agent"),
    status=st.sampled_from(enums.RunStatus),
    attempt=st.integers(0, 1000),
    start_node_id=_opt(prefixed("node")),
    end_node_id=_opt(prefixed("node")),
    end_reason=_opt(st.sampled_from(enums.EndReason)),
    turn_count=_opt(st.integers(0, 1000)),
    usage_json=_opt(model_json(usages)),
    error_json=_opt(model_json(error_payloads)),
    metadata_json=_opt(json_text(json_objects)),
    created_at=iso_timestamps,
    updated_at=iso_timestamps,
    claim_command_id=_opt(prefixed("cmd")),
)
node_records = st.builds(
    NodeRecord,
    node_id=prefixed("node"),
    node_seq=st.integers(0, 2**40),
    parent_id=_opt(prefixed("node")),
    agent_id=prefixed("agent"),
    run_id=_opt(prefixed("run")),
    role=st.sampled_from(enums.Role),
    node_type=st.sampled_from(enums.NodeType),
    content_json=content_json,
    metadata_json=_opt(json_text(json_objects)),
    token_count=_opt(st.integers(0, 10**7)),
    created_at=iso_timestamps,
)
event_records = st.builds(
    EventRecord,
    event_id=prefixed("evt"),
    seq=st.integers(0, 2**40),
    run_seq=_opt(st.integers(0, 2**40)),
    agent_id=_opt(prefixed("agent")),
    run_id=_opt(prefixed("run")),
    level=st.sampled_from(enums.EventLevel),
    event_type=st.sampled_from(enums.EventType),
    node_id=_opt(prefixed("node")),
    tool_call_id=_opt(tool_call_ids),
    payload_json=_opt(json_text(json_objects)),
    created_at=iso_timestamps,
)
artifact_records = st.builds(
    ArtifactRecord,
    artifact_id=prefixed("artifact"),
    session_id=session_ids,
    agent_id=_opt(prefixed("agent")),
    run_id=_opt(prefixed("run")),
    node_id=_opt(prefixed("node")),
    tool_call_id=_opt(tool_call_ids),
    # As CreateArtifact admits them: logical (legacy host paths: test_mappers' own test).
    path=st.from_regex(r"[^/\\~][^\\]{0,49}", fullmatch=True),
    filename=opt_texts,
    mime_type=opt_texts,
    size_bytes=_opt(st.integers(0, 2**40)),
    summary=opt_texts,
    metadata_json=_opt(json_text(json_objects)),
    created_at=iso_timestamps,
)
