"""Session search through the whole stack: ``GET /v1/sessions?q=`` over many sessions.

A home is filled before the stack starts, through the storage-writer's own ``Writer`` (the code
that maintains the search index on every write, without the bus in between so that filling
200,000 messages takes a minute, not an hour): ``SESSIONS`` sessions of the development
account, each with a title of three words and ``MESSAGES`` messages (alternately user and
assistant, 8–40 words each). Words come from a vocabulary of ``VOCABULARY`` made-up words drawn
with Zipf-like frequencies, so some words are in most sessions and most words in few. Then
``soong-agent up`` (scripted model) starts on that home and ``QUERIES`` searches are sent one at
a time over a keep-alive connection, each the default page of 50: a word drawn by frequency
(often a common one), a rare word, two words, a title word, and a prefix of a word.

Printed last, one JSON line: ``search_p50_ms``, ``search_p95_ms`` (goal ≤ 50 ms at 10,000
sessions of 20 messages), ``search_p99_ms``, ``search_hits_median`` (sessions per answer),
``search_fill_s``, ``search_sessions`` and ``search_messages``. ``--sessions N`` and
``--messages M`` change the size (a quick check: ``--sessions 200``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402
from helpers.homes import stack_home  # noqa: E402

from agent_core.bus.contracts.storage import AppendNode, CreateSession, StorageCommand  # noqa: E402
from agent_core.ids import new_id, new_session_id  # noqa: E402
from agent_core.types.enums import EventType, Role  # noqa: E402
from agent_core.types.protocol import TextBlock  # noqa: E402
from agent_core.types.runtime import Node, TimelineEvent  # noqa: E402
from services.gateway.devkey import DEV_ACCOUNT  # noqa: E402
from services.storage_writer.shards import open_catalog  # noqa: E402
from services.storage_writer.writer import Writer  # noqa: E402
from tests.conftest import start_stack, stop_stack  # noqa: E402

SESSIONS = 10_000
MESSAGES = 20
VOCABULARY = 5_000
QUERIES = 400
BATCH = 2_000  # commands per writer batch while filling
CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
"""


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zu", "pe", "shi", "da", "fo"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1.0 / (rank + 1) for rank in range(len(ordered))]  # Zipf, s = 1
    return ordered, weights


def _fill(home: Path, sessions: int, messages: int, rng: random.Random) -> list[str]:
    """Write the sessions through the writer; the title words (for title queries)."""
    words, weights = _vocabulary(rng)
    layout = open_catalog(home / "sessions.sqlite")
    writer = Writer(layout, home / "artifacts", 64 * 1024)
    titles: list[str] = []
    pending: list[StorageCommand] = []

    def flush() -> None:
        for receipt in writer.apply_batch(pending):
            assert receipt.ok, receipt.error
        pending.clear()

    try:
        for _ in range(sessions):
            title = rng.choices(words, weights, k=3)
            titles.extend(title)
            agent = new_id("agent")
            session = CreateSession(
                command_id=new_id("cmd"),
                session_id=new_session_id(),
                account_id=DEV_ACCOUNT,
                cwd="workspace",
                root_agent_id=agent,
                metadata={"title": " ".join(title)},
            )
            pending.append(session)
            parent = None
            for i in range(messages):
                text = " ".join(rng.choices(words, weights, k=rng.randint(8, 40)))
                node = Node(
                    node_id=new_id("node"),
                    parent_id=parent,
                    agent_id=agent,
                    role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
                    content=[TextBlock(text=text)],
                )
                event = TimelineEvent(
                    event_id=new_id("evt"), event_type=EventType.NODE_CREATED, agent_id=agent
                )
                pending.append(
                    AppendNode(
                        command_id=new_id("cmd"),
                        session_id=session.session_id,
                        node=node,
                        event=event,
                        set_active=True,
                    )
                )
                parent = node.node_id
            if len(pending) >= BATCH:
                flush()
        flush()
    finally:
        writer.close()
    return titles


def _queries(rng: random.Random, titles: list[str]) -> list[str]:
    words, weights = _vocabulary(random.Random(7))  # the same vocabulary as the fill
    out: list[str] = []
    for i in range(QUERIES):
        kind = i % 5
        if kind == 0:
            out.append(rng.choices(words, weights)[0])
        elif kind == 1:
            out.append(rng.choice(words[VOCABULARY // 2 :]))
        elif kind == 2:
            out.append(" ".join(rng.choices(words, weights, k=2)))
        elif kind == 3:
            out.append(rng.choice(titles))
        else:
            word = rng.choices(words, weights)[0]
            out.append(word[: max(3, len(word) - 2)])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument("--messages", type=int, default=MESSAGES)
    args = parser.parse_args()
    home = stack_home("bench-search-")
    (home / "config.toml").write_text(CONFIG)
    started = time.perf_counter()
    titles = _fill(home, args.sessions, args.messages, random.Random(7))
    fill_s = time.perf_counter() - started
    queries = _queries(random.Random(11), titles)
    stack = start_stack(home, workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        headers = {"Authorization": f"Bearer {stack.api_key}"}
        with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30) as c:
            listed = c.get("/v1/sessions", params={"limit": 1}).json()["items"]
            assert listed, "the filled sessions are not the key's"
            for q in queries[:20]:  # warm the connections and the page cache
                c.get("/v1/sessions", params={"q": q})
            latencies: list[float] = []
            hits: list[int] = []
            for q in queries:
                t0 = time.perf_counter()
                response = c.get("/v1/sessions", params={"q": q})
                latencies.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.text
                hits.append(len(response.json()["items"]))
    finally:
        stop_stack(stack.process)
    cuts = statistics.quantiles(latencies, n=100)
    result = {
        "search_p50_ms": round(statistics.median(latencies), 2),
        "search_p95_ms": round(cuts[94], 2),
        "search_p99_ms": round(cuts[98], 2),
        "search_hits_median": statistics.median(hits),
        "search_fill_s": round(fill_s, 1),
        "search_sessions": args.sessions,
        "search_messages": args.sessions * args.messages,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
