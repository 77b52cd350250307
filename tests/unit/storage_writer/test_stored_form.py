"""The stored form the writer writes (docs/architecture.md, "Storage"), which the mappers read back:
compact JSON keeping non-ASCII text, an empty ``metadata`` as NULL, content blocks without their
``None`` fields, fixed-width UTC timestamps; values that are not JSON are never stored."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core.bus.contracts.storage import GetNode
from agent_core.types.mappers import to_node
from agent_core.types.protocol import ArtifactRefBlock, TextBlock
from agent_core.types.storage import NodeRecord
from services.storage_writer.apply_common import dump_json
from services.storage_writer.queries import QueryEngine
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_session

_FIXED_WIDTH_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


def test_stored_json_is_compact_keeps_unicode_and_reads_back(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session()
    content = [TextBlock(text="你好"), ArtifactRefBlock(artifact_id="artifact_1")]
    rich = append_node(s, content=content)
    rich = rich.model_copy(update={"node": rich.node.model_copy(update={"metadata": {"k": "é"}})})
    plain = append_node(s)
    receipts = writer.apply_batch([s, rich, plain])
    assert all(r.ok for r in receipts)
    row = NodeRecord.model_validate(
        engine.answer(GetNode(session_id=s.session_id, node_id=rich.node.node_id)).data
    )
    assert row.content_json == (
        '[{"type":"text","text":"你好"},{"type":"artifact_ref","artifact_id":"artifact_1"}]'
    )
    assert row.metadata_json == '{"k":"é"}'
    assert _FIXED_WIDTH_UTC.fullmatch(row.created_at), row.created_at
    node = to_node(row)
    assert (node.content, node.metadata) == (content, {"k": "é"})
    assert node.created_at.tzinfo == UTC  # datetime.UTC or TzInfo(0)
    empty = engine.answer(GetNode(session_id=s.session_id, node_id=plain.node.node_id)).data
    assert empty["metadata_json"] is None  # an empty dict is NULL, read back as {}
    assert to_node(NodeRecord.model_validate(empty)).metadata == {}


@pytest.mark.parametrize(
    "metadata",
    [{"x": math.nan}, {"x": math.inf}, {"when": datetime(2026, 1, 1, tzinfo=UTC)}, {"s": {1, 2}}],
)
def test_non_json_metadata_cannot_be_stored(metadata: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        dump_json(metadata)
