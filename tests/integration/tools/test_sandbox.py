"""run_python's sandbox with real subprocesses: caps, timeouts, process groups, environment."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import psutil
import pytest

from agent_core.tools.sandbox import CappedBuffer, SandboxLimits, run_python


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _group_members(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and _alive(proc.pid):
                members.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


async def test_runs_in_cwd_and_reports_exit(tmp_path: Path) -> None:
    result = await run_python("import os; print(os.getcwd()); raise SystemExit(3)", cwd=tmp_path)
    assert result.stdout.strip() == str(tmp_path)
    assert result.exit_code == 3
    assert not result.ok
    assert list(tmp_path.iterdir()) == []  # the script file is removed


async def test_traceback_goes_to_stderr(tmp_path: Path) -> None:
    result = await run_python("1/0", cwd=tmp_path)
    assert result.exit_code == 1
    assert "ZeroDivisionError" in result.stderr


async def test_fifty_megabytes_of_output_are_capped(tmp_path: Path) -> None:
    me = psutil.Process()
    rss_before = me.memory_info().rss
    code = "import sys\nchunk = 'x' * (1024 * 1024) + '\\n'\nfor _ in range(50): sys.stdout.write(chunk)\nprint('THE-END')"
    result = await run_python(code, cwd=tmp_path, limits=SandboxLimits(output_cap_bytes=64 * 1024))
    rss_growth = me.memory_info().rss - rss_before
    assert result.ok
    assert result.stdout_bytes > 50 * 1024 * 1024
    assert len(result.stdout) < 70 * 1024
    assert "[truncated " in result.stdout
    assert result.stdout.rstrip().endswith("THE-END")  # the tail is kept
    assert rss_growth < 30 * 1024 * 1024


async def test_forking_script_past_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    code = """
import os, time, json
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            time.sleep(600)
        time.sleep(600)
        os._exit(0)
    pids.append(pid)
with open("pids.json", "w") as fh:
    json.dump({"pgid": os.getpgid(0), "pids": pids + [os.getpid()]}, fh)
time.sleep(600)
"""
    result = await run_python(code, cwd=tmp_path, limits=SandboxLimits(timeout_s=1.5))
    assert result.timed_out
    info = json.loads((tmp_path / "pids.json").read_text())
    assert info["pgid"] != os.getpgid(0)  # the script had its own group

    def survivors() -> list[int]:
        # A pid the kernel has already reused (pid_max can be 32768) belongs to another group:
        # only a process still in the script's group is a survivor.
        return [p for p in info["pids"] if _alive(p) and _pgid(p) == info["pgid"]]

    for _ in range(100):  # the kernel delivers SIGKILL asynchronously, grandchildren included
        if not survivors() and not _group_members(info["pgid"]):
            break
        await asyncio.sleep(0.05)
    assert survivors() == []
    assert _group_members(info["pgid"]) == []


async def test_background_child_does_not_outlive_a_normal_exit(tmp_path: Path) -> None:
    code = """
import os, time
if os.fork() == 0:
    os.close(1); os.close(2)
    time.sleep(600)
    os._exit(0)
print(os.getpgid(0))
"""
    result = await run_python(code, cwd=tmp_path, limits=SandboxLimits(timeout_s=20))
    assert result.ok
    pgid = int(result.stdout)
    for _ in range(50):
        if not _group_members(pgid):
            break
        await asyncio.sleep(0.05)
    assert _group_members(pgid) == []


async def test_cancellation_kills_the_group_and_propagates(tmp_path: Path) -> None:
    code = "import os, time\nopen('pgid', 'w').write(str(os.getpgid(0)))\ntime.sleep(600)"
    task = asyncio.create_task(run_python(code, cwd=tmp_path))
    for _ in range(200):
        if (tmp_path / "pgid").exists() and (tmp_path / "pgid").read_text():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pgid = int((tmp_path / "pgid").read_text())
    for _ in range(50):
        if not _group_members(pgid):
            break
        await asyncio.sleep(0.05)
    assert _group_members(pgid) == []


async def test_worker_secrets_do_not_reach_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_SECRET_KEY", "sk-worker-secret-123456789")
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    result = await run_python(code, cwd=tmp_path)
    env = json.loads(result.stdout)
    assert "SOONG_TEST_SECRET_KEY" not in env
    assert "sk-worker-secret" not in result.stdout
    assert env["HOME"] == str(tmp_path)
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONUNBUFFERED", "LC_CTYPE"}


async def test_memory_limit_stops_a_hungry_script(tmp_path: Path) -> None:
    code = "x = bytearray(1024 * 1024 * 1024)\nprint('allocated')"
    result = await run_python(
        code, cwd=tmp_path, limits=SandboxLimits(memory_bytes=256 * 1024 * 1024)
    )
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


async def test_file_size_limit(tmp_path: Path) -> None:
    code = "open('big', 'wb').write(b'x' * (2 * 1024 * 1024))"
    result = await run_python(code, cwd=tmp_path, limits=SandboxLimits(file_size_bytes=1024 * 1024))
    assert result.exit_code != 0
    assert (tmp_path / "big").stat().st_size <= 1024 * 1024


async def test_cpu_limit_kills_a_busy_loop(tmp_path: Path) -> None:
    result = await run_python(
        "while True: pass", cwd=tmp_path, limits=SandboxLimits(timeout_s=30, cpu_s=1)
    )
    assert not result.timed_out
    assert result.exit_code is not None and result.exit_code < 0  # killed by SIGXCPU / SIGKILL


def test_capped_buffer_keeps_head_and_tail_and_counts_the_rest() -> None:
    buf = CappedBuffer(100)
    for i in range(1000):
        buf.feed(f"{i:04d}".encode())
    text = buf.render()
    assert text.startswith("0000")
    assert text.endswith("0999")
    assert buf.total == 4000
    assert buf.dropped == 4000 - 100
    assert f"[truncated {buf.dropped} bytes]" in text


def test_capped_buffer_under_cap_is_verbatim() -> None:
    buf = CappedBuffer(100)
    buf.feed(b"hello ")
    buf.feed(b"world")
    assert buf.render() == "hello world"
    assert buf.dropped == 0
