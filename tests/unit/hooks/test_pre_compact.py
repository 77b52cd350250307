"""PreCompact hooks run when a compaction happens: the compactor calls them once it has chosen
what to cover, before the summarizer (here a manual ``/compact`` in a fork's run, whose path has
the parent's conversation before the command)."""

from __future__ import annotations

import json
from pathlib import Path

from agent_core.types.enums import EventType, NodeType
from tests.unit.hooks.rig import run_agent, script, toml_str


async def test_a_compaction_runs_the_pre_compact_hooks_first(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    hook = script(tmp_path, "hook.sh", f"cat > {toml_str(str(seen))}\nprintf '{{}}'")
    config = f'[[hooks.PreCompact]]\nname = "note"\ncommand = [{toml_str(str(hook))}]\n'
    out = await run_agent(tmp_path, config, "fork", prompt="/compact")
    assert out.ending.text.startswith("Compacted: 1 earlier messages are summarized")
    (compaction,) = [n for n in out.store.nodes if n.node_type is NodeType.COMPACTION]
    records = out.events(EventType.HOOK_EXECUTED)
    # The compaction's own call, then the rig's (it calls every notification once at the end).
    assert [(r["event"], r["outcome"]) for r in records] == [("PreCompact", "ok")] * 2
    first = next(i for i, (t, _) in enumerate(out.store.events) if t is EventType.HOOK_EXECUTED)
    compacted = next(
        i for i, (t, _) in enumerate(out.store.events) if t is EventType.CONTEXT_COMPACTED
    )
    assert first < compacted, "the hook ran before the compaction was written"
    assert json.loads(seen.read_text())["metadata"]["path_nodes"] >= 2
    assert compaction.metadata["trigger"] == "manual"
