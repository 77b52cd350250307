"""What skills cost a run's start: the scan of a session's skill folders and its context listing.

In one process, on a temporary home: ``session_skills`` (the operator's, the account's and the
project's folders, as the run-worker calls it at every run's start) with no skill folders at all,
and with 50 skills in the account's folder (files unchanged since the last scan, the usual case:
each is ``stat``-ed, none parsed again); then the first scan of those 50 files (parsed), and the
context builder with and without the 50-skill listing.

Printed last, one JSON line: ``scan_none_p50_us``, ``scan_50_cached_p50_us``,
``scan_50_cold_ms`` (first scan, every file parsed), ``build_listing_added_p50_us`` (the build's
added time with the listing) and ``listing_chars_50``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.config import load_settings  # noqa: E402
from agent_core.context import ContextBuilder  # noqa: E402
from agent_core.skills import RunSkills, session_skills  # noqa: E402
from agent_core.types.enums import Role  # noqa: E402
from agent_core.types.protocol import TextBlock  # noqa: E402
from agent_core.types.runtime import AgentConfig, Node  # noqa: E402

SESSION = "sess_20260101_000000_abcd"
N = 2000


def _p50_us(fn: object, n: int = N) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = load_settings(env={"SOONG_AGENT_HOME": str(home)}, config_file=home / "none")
        root = home / "accounts" / "acct" / "sessions" / SESSION
        root.mkdir(parents=True)

        def scan(account: str) -> object:
            return session_skills(
                settings, account_id=account, cwd="workspace", workspace_root=root
            )

        none = _p50_us(lambda: scan("nobody"))
        skills = home / "accounts" / "acct" / "skills"
        for i in range(50):
            folder = skills / f"skill-{i:02d}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: skill-{i:02d}\ndescription: Does task number {i} in the usual "
                f"way, with care.\nallowed_tools: [read_file, grep]\n---\n" + "Step.\n" * 200
            )
        t = time.perf_counter()
        catalog = scan("acct")
        cold_ms = (time.perf_counter() - t) * 1000
        cached = _p50_us(lambda: scan("acct"))
        run = RunSkills(catalog)  # type: ignore[arg-type]
        assert run.listing is not None and len(run.listing.names) == 50
        path = [Node(node_id="node_0000000000000001", agent_id="agent_aaaaaaaaaaaaaaaa",
                     role=Role.USER, content=[TextBlock(text="hello")])]  # fmt: skip
        config = AgentConfig(provider="p", model="m", system_prompt="You help.")
        plain, listed = ContextBuilder(), ContextBuilder(skills=run.listing)
        base = _p50_us(lambda: plain.build(path, session_id=SESSION, config=config))
        with_listing = _p50_us(lambda: listed.build(path, session_id=SESSION, config=config))
    print(
        json.dumps(
            {
                "scan_none_p50_us": round(none, 1),
                "scan_50_cached_p50_us": round(cached, 1),
                "scan_50_cold_ms": round(cold_ms, 2),
                "build_listing_added_p50_us": round(with_listing - base, 1),
                "listing_chars_50": len(run.listing.text),
            }
        )
    )


if __name__ == "__main__":
    main()
