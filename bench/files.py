"""What the file store adds to a run, ``s3`` against ``local``, in one run on loopback.

A workspace of 20 files (100 KiB each) is mirrored (``agent_core.files.mirror``) to each engine:
the ``s3`` one is a moto server on a free loopback port (``tests/engines/s3.py``), the ``local``
one a second folder on this disk (what a sync would cost if the store were a local folder; the
local engine itself runs no mirror at all, so it adds nothing to a run). Measured per engine:

* ``store_added_p50_ms_no_change``: a sync after a tool call that changed no file (goal ≤ 2 ms);
* ``store_added_p50_ms_one_100kb``: a sync after one 100 KiB file changed (goal ≤ 20 ms);
* ``hydrate_ms_100_files_10mb``: a fresh host's hydrate of 100 files of 100 KiB (goal ≤ 500 ms).

Keys without a suffix are the ``s3`` engine's; ``_local`` ones the folder's. The last line
printed is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_core.config.files import S3Settings
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.files.mirror import WorkspaceMirror
from agent_core.files.s3 import S3FileStore
from tests.engines.s3 import start_moto

PREFIX = "accounts/bench/sessions/sess_bench"
KIB_100 = 100 * 1024


async def _p50_ms(op: Callable[[], Awaitable[object]], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await op()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


async def _measure(store: FileStore, work: Path) -> dict[str, float]:
    mirror = WorkspaceMirror(store, PREFIX, work / "host-a")
    await mirror.hydrate()
    for i in range(20):
        (mirror.root / "output" / f"f{i:02}.bin").write_bytes(os.urandom(KIB_100))
    await mirror.sync()
    no_change = await _p50_ms(mirror.sync, 50)
    target = mirror.root / "output" / "f00.bin"

    async def one_changed() -> None:
        target.write_bytes(os.urandom(KIB_100))
        await mirror.sync()

    one = await _p50_ms(one_changed, 20)
    # 100 files of 100 KiB in the store (20 there already), then fresh hosts hydrate them.
    for i in range(20, 100):
        (mirror.root / "scratchpad" / f"g{i:03}.bin").write_bytes(os.urandom(KIB_100))
    await mirror.sync()
    hosts = iter(range(1000))

    async def fresh_hydrate() -> None:
        fresh = WorkspaceMirror(store, PREFIX, work / f"host-{next(hosts)}")
        assert await fresh.hydrate() == 100
        fresh.drop()

    hydrate = await _p50_ms(fresh_hydrate, 5)
    return {
        "store_added_p50_ms_no_change": no_change,
        "store_added_p50_ms_one_100kb": one,
        "hydrate_ms_100_files_10mb": hydrate,
    }


async def main() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        work = Path(tmp)
        moto = start_moto(work / "moto.log")
        try:
            bucket = moto.new_bucket("bench-files")
            s3 = await _measure(S3FileStore(S3Settings(bucket=bucket), env=moto.env()), work / "s3")
        finally:
            moto.stop()
        local = await _measure(LocalFileStore(work / "store"), work / "local")
    return {**s3, **{f"{k}_local": v for k, v in local.items()}}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
