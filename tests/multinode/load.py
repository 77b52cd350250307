"""The failover load of the multi-host harness: sessions × turns through the gateways, a fault
injected once enough runs were accepted, and the audit of what survived.

``sessions`` clients each post ``turns`` messages one after the other (``s<i> turn <t>``),
through the given gateways in turn, each waiting for its run's end before the next. A post that
fails (an error status, a reset, no answer) is tried again with the same ``Idempotency-Key`` on
the next gateway: a run counts as *accepted* once its post was answered 202, and a retried post
names the run its first, unanswered, attempt may have made. Once ``kill_after`` runs were
accepted the fault (a coroutine the caller gives) is injected, once.

:meth:`Load.audit` then reads every session's stored tree and every accepted run's stream:
``lost`` (accepted runs that did not complete within ``drain_s``), ``finished_twice`` (a stream
with more than one ``run_finished``), ``duplicate_nodes`` (a message or an answer present twice on
a tree) and ``missing_nodes`` (an accepted run whose message is not on its session's tree).

Shared by ``bench/bus_failover.py`` (the bus's primary killed) and the tests that kill a
storage-writer's host (``test_postgres_writers.py``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from tests.multinode.cluster import Cluster

__all__ = ["TERMINAL", "Load", "LoadShape"]

TERMINAL = ("completed", "failed", "cancelled", "aborted")


@dataclass(frozen=True)
class LoadShape:
    """How much load, and when the fault comes (after ``kill_after`` accepted runs)."""

    sessions: int = 50
    turns: int = 10
    kill_after: int = 100
    drain_s: float = 120.0  # how long one run may take to end, the failover included

    @classmethod
    def parse(cls, text: str, drain_s: float = 120.0) -> LoadShape:
        """``"50x10"`` (sessions × turns), the fault after a fifth of the runs."""
        sessions, turns = (int(part) for part in text.lower().split("x"))
        return cls(sessions, turns, max(1, sessions * turns // 5), drain_s)


class Load:
    """The clients, what they were answered, and the fault in the middle."""

    def __init__(self, cl: Cluster, gateways: Sequence[str], shape: LoadShape) -> None:
        self.cl = cl
        self.shape = shape
        headers = {"Authorization": f"Bearer {cl.api_key}"}
        self.apis = [
            httpx.AsyncClient(base_url=cl.hosts[h].gateway_url, headers=headers, timeout=10)
            for h in gateways
        ]
        self.accepted: list[tuple[str, str, str, float]] = []  # (session, run, text, when)
        self.ended: dict[str, tuple[str, float]] = {}  # run -> (status, when seen ended)
        self.refused = 0
        self.killed_at: float | None = None
        self.enough = asyncio.Event()

    async def close(self) -> None:
        for api in self.apis:
            await api.aclose()

    def _api(self, i: int) -> httpx.AsyncClient:
        return self.apis[i % len(self.apis)]

    async def _post(self, i: int, sid: str, text: str) -> str:
        # A retry repeats the key: it names the run a first, unanswered, attempt may have made.
        headers = {"Idempotency-Key": text.replace(" ", "-")}
        while True:
            try:
                reply = await self._api(i).post(
                    f"/v1/sessions/{sid}/messages", json={"text": text}, headers=headers
                )
                if reply.status_code == 202:
                    run_id = str(reply.json()["run_id"])
                    self.accepted.append((sid, run_id, text, time.monotonic()))
                    if len(self.accepted) >= self.shape.kill_after:
                        self.enough.set()
                    return run_id
                if 400 <= reply.status_code < 500 and reply.status_code not in (408, 429):
                    raise RuntimeError(f"post refused: {reply.status_code} {reply.text}")
            except httpx.HTTPError:
                pass
            self.refused += 1
            i += 1  # the next gateway next time
            await asyncio.sleep(0.5)

    async def _session(self, i: int) -> str:
        while True:
            try:
                reply = await self._api(i).post("/v1/sessions", json={})
                if reply.status_code == 201:
                    return str(reply.json()["session_id"])
            except httpx.HTTPError:
                pass
            self.refused += 1
            i += 1
            await asyncio.sleep(0.5)

    async def _wait_end(self, i: int, sid: str, run_id: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                reply = await self._api(i).get(f"/v1/sessions/{sid}/runs/{run_id}")
                if reply.status_code == 200 and reply.json()["status"] in TERMINAL:
                    self.ended[run_id] = (str(reply.json()["status"]), time.monotonic())
                    return
            except httpx.HTTPError:
                pass
            i += 1
            await asyncio.sleep(0.3)

    async def client(self, index: int) -> str:
        sid = await self._session(index)
        for turn in range(self.shape.turns):
            run_id = await self._post(index + turn, sid, f"s{index} turn {turn}")
            await self._wait_end(index + turn, sid, run_id, time.monotonic() + self.shape.drain_s)
            if run_id not in self.ended:
                break  # this session's next turn would only queue behind a lost one
        return sid

    async def _fault(self, kill: Callable[[], Awaitable[None]]) -> None:
        await self.enough.wait()
        await kill()
        self.killed_at = time.monotonic()

    async def run(self, kill: Callable[[], Awaitable[None]]) -> dict[str, float]:
        """Drive every client to its end with ``kill`` injected once, then audit; the figures."""
        fault = asyncio.create_task(self._fault(kill))
        try:
            sids = await asyncio.gather(*(self.client(i) for i in range(self.shape.sessions)))
            await fault
            assert self.killed_at is not None
            after = sorted(
                self.ended[run][1]
                for _, run, _, at in self.accepted
                if at > self.killed_at and self.ended.get(run, ("", 0.0))[0] == "completed"
            )
            audit = await self.audit(list(sids))
        finally:
            fault.cancel()
        completed = sum(1 for status, _ in self.ended.values() if status == "completed")
        return {
            "serving_again_s": (after[0] - self.killed_at) if after else float("inf"),
            "accepted": len(self.accepted),
            "completed": completed,
            "lost": len(self.accepted) - completed,
            "refused_posts": self.refused,
            **audit,
        }

    async def audit(self, sids: list[str]) -> dict[str, float]:
        """Finished-twice runs, duplicated and missing nodes, from the stored trees and the
        streams."""
        api = self.apis[0]
        finished_twice = duplicates = missing = 0
        texts: dict[str, collections.Counter[tuple[str, str]]] = {}
        for sid in sids:
            reply = await api.get(f"/v1/sessions/{sid}/tree")
            assert reply.status_code == 200, reply.text
            texts[sid] = collections.Counter(
                (n["role"], n["preview"])
                for n in reply.json()["nodes"]
                if n["node_type"] == "message"
            )
            duplicates += sum(c - 1 for c in texts[sid].values() if c > 1)
        for sid, run_id, text, _ in self.accepted:
            missing += texts[sid][("user", text)] == 0
            async with api.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as reply:
                kinds = [
                    line[7:] async for line in reply.aiter_lines() if line.startswith("event: ")
                ]
            finished_twice += kinds.count("run_finished") > 1
        return {
            "finished_twice": finished_twice,
            "duplicate_nodes": duplicates,
            "missing_nodes": missing,
        }
