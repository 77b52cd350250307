"""The code runners with real subprocesses: caps, limits, the kill of the whole tree, the
environment — for the bubblewrap sandbox and for ``sandbox.mode = "off"`` alike.

No test here skips: where bubblewrap cannot run, these fail (CI installs it).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import psutil
import pytest

from agent_core.tools import Area, Workspace
from agent_core.tools.sandbox import (
    BwrapRunner,
    CappedBuffer,
    CodeRunner,
    DirectRunner,
    SandboxConfig,
    SandboxLimits,
    SandboxResult,
)

PYTHON = "python3"  # the system's, found on the sandbox's PATH
CONFIG = SandboxConfig()
LIMITS = SandboxLimits(timeout_s=20, write_quota_bytes=64 * 1024 * 1024, min_free_disk_bytes=0)


@pytest.fixture(params=["bwrap", "off"])
def runner(request: pytest.FixtureRequest) -> CodeRunner:
    """Each behaviour holds in the sandbox and with it off."""
    return BwrapRunner(CONFIG) if request.param == "bwrap" else DirectRunner(CONFIG)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "home", "acct_1", "sess_1")
    workspace.ensure()
    return workspace


def marker() -> str:
    """A unique argument that finds the call's processes in the host's process list."""
    return "marker-" + secrets.token_hex(6)


async def py(
    runner: CodeRunner, ws: Workspace, code: str, limits: SandboxLimits = LIMITS, *extra: str
) -> SandboxResult:
    return await runner.run([PYTHON, "-c", code, *extra], ws, limits)


def tagged(tag: str) -> list[int]:
    """Live processes whose command line carries ``tag``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if tag in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return found


async def gone(tag: str) -> list[int]:
    """Wait (bounded) for every process carrying ``tag`` to be gone; what is left."""
    for _ in range(100):  # SIGKILL is delivered asynchronously, grandchildren included
        if not tagged(tag):
            return []
        await asyncio.sleep(0.05)
    return tagged(tag)


async def test_runs_in_the_scratchpad_and_reports_exit(runner: CodeRunner, ws: Workspace) -> None:
    result = await py(runner, ws, "import os; print(os.getcwd()); raise SystemExit(3)")
    expected = "/workspace/scratchpad" if runner.mode == "bwrap" else str(ws.scratchpad)
    assert result.stdout.strip() == expected
    assert result.exit_code == 3 and not result.ok and result.stopped_for is None


async def test_traceback_goes_to_stderr(runner: CodeRunner, ws: Workspace) -> None:
    result = await py(runner, ws, "1/0")
    assert result.exit_code == 1
    assert "ZeroDivisionError" in result.stderr


async def test_fifty_megabytes_of_output_are_capped(runner: CodeRunner, ws: Workspace) -> None:
    me = psutil.Process()
    rss_before = me.memory_info().rss
    code = (
        "import sys\nchunk = 'x' * (1024 * 1024) + '\\n'\n"
        "for _ in range(50): sys.stdout.write(chunk)\nprint('THE-END')"
    )
    limits = SandboxLimits(output_cap_bytes=64 * 1024, min_free_disk_bytes=0)
    result = await py(runner, ws, code, limits)
    assert result.ok
    assert result.stdout_bytes > 50 * 1024 * 1024
    assert len(result.stdout) < 70 * 1024 and "[truncated " in result.stdout
    assert result.stdout.rstrip().endswith("THE-END")  # the tail is kept
    assert me.memory_info().rss - rss_before < 30 * 1024 * 1024


_FORKS = """
import os, sys, time
for _ in range(3):
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(600)
        time.sleep(600)
        os._exit(0)
print('forked', flush=True)
time.sleep(600)
"""


async def test_timeout_kills_every_process_of_the_call(runner: CodeRunner, ws: Workspace) -> None:
    tag = marker()
    limits = SandboxLimits(timeout_s=1.5, min_free_disk_bytes=0)
    result = await py(runner, ws, _FORKS, limits, tag)
    assert result.timed_out and not result.ok
    assert "forked" in result.stdout
    assert await gone(tag) == []


async def test_a_process_that_leaves_the_group_dies_with_the_sandbox(ws: Workspace) -> None:
    """setsid() leaves the process group; the PID namespace still takes it down."""
    tag = marker()
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    os.close(1); os.close(2)\n"
        "    time.sleep(600)\nprint('escaped?')"
    )
    result = await py(BwrapRunner(CONFIG), ws, code, LIMITS, tag)
    assert result.ok and "escaped?" in result.stdout
    assert await gone(tag) == []


async def test_background_child_does_not_outlive_a_normal_exit(
    runner: CodeRunner, ws: Workspace
) -> None:
    tag = marker()
    code = "import os, time\nif os.fork() == 0:\n    os.close(1); os.close(2)\n    time.sleep(600)"
    result = await py(runner, ws, code, LIMITS, tag)
    assert result.ok
    assert await gone(tag) == []


async def test_cancellation_kills_the_call_and_propagates(
    runner: CodeRunner, ws: Workspace
) -> None:
    tag = marker()
    code = "import time\nopen('started', 'w').write('1')\ntime.sleep(600)"
    task = asyncio.create_task(py(runner, ws, code, LIMITS, tag))
    started = ws.scratchpad / "started"
    for _ in range(200):
        if started.exists():
            break
        await asyncio.sleep(0.05)
    assert started.exists()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(tag) == []


async def test_worker_secrets_do_not_reach_the_code(
    runner: CodeRunner, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_SECRET_KEY", "sk-worker-secret-123456789")
    monkeypatch.setenv("SOONG_REDIS_URL", "redis://:hunter2@127.0.0.1:6379/0")
    result = await py(runner, ws, "import os, json; print(json.dumps(dict(os.environ)))")
    env = json.loads(result.stdout)
    assert "sk-worker-secret" not in result.stdout and "hunter2" not in result.stdout
    assert set(env) <= {
        "PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PWD", "LC_CTYPE",
        "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    }  # fmt: skip


async def test_configured_variables_are_passed(ws: Workspace) -> None:
    config = SandboxConfig(extra_env={"MPLBACKEND": "Agg"})
    result = await py(BwrapRunner(config), ws, "import os; print(os.environ['MPLBACKEND'])")
    assert result.stdout.strip() == "Agg"


async def test_memory_limit_stops_a_hungry_script(runner: CodeRunner, ws: Workspace) -> None:
    code = "x = bytearray(1024 * 1024 * 1024)\nprint('allocated')"
    limits = SandboxLimits(memory_bytes=256 * 1024 * 1024, min_free_disk_bytes=0)
    result = await py(runner, ws, code, limits)
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr and "allocated" not in result.stdout


async def test_file_size_limit(runner: CodeRunner, ws: Workspace) -> None:
    code = "open('big', 'wb').write(b'x' * (2 * 1024 * 1024))"
    limits = SandboxLimits(file_size_bytes=1024 * 1024, min_free_disk_bytes=0)
    result = await py(runner, ws, code, limits)
    assert result.exit_code != 0
    assert (ws.scratchpad / "big").stat().st_size <= 1024 * 1024


async def test_cpu_limit_kills_a_busy_loop(runner: CodeRunner, ws: Workspace) -> None:
    limits = SandboxLimits(timeout_s=30, cpu_s=1, min_free_disk_bytes=0)
    result = await py(runner, ws, "while True: pass", limits)
    assert not result.timed_out
    assert result.exit_code is not None and result.exit_code < 0  # SIGXCPU, then SIGKILL


async def test_write_quota_stops_a_script_filling_the_disk(
    runner: CodeRunner, ws: Workspace
) -> None:
    code = (
        "import os\nchunk = b'x' * (1024 * 1024)\n"
        "for i in range(10_000):\n    open(f'fill{i}', 'wb').write(chunk)"
    )
    limits = SandboxLimits(timeout_s=60, write_quota_bytes=8 * 1024 * 1024, min_free_disk_bytes=0)
    result = await py(runner, ws, code, limits)
    assert result.stopped_for == "write_quota" and not result.ok
    written = sum(f.stat().st_size for f in ws.scratchpad.iterdir())
    assert written < 1024 * 1024 * 1024  # stopped long before the loop's 10 GB


async def test_a_full_disk_refuses_the_call(runner: CodeRunner, ws: Workspace) -> None:
    limits = SandboxLimits(min_free_disk_bytes=2**62)  # no disk has that much free
    result = await py(runner, ws, "open('x', 'w').write('never')", limits)
    assert result.stopped_for == "disk_full" and result.exit_code is None
    assert not (ws.scratchpad / "x").exists()


async def test_fork_bomb_is_bounded(ws: Workspace) -> None:
    tag = marker()
    code = (
        "import os, sys\ncount = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n        count += 1\n"
        "except OSError as exc:\n    print('refused after', count, type(exc).__name__)"
    )
    limits = SandboxLimits(timeout_s=20, max_processes=16, min_free_disk_bytes=0)
    result = await py(BwrapRunner(CONFIG), ws, code, limits, tag)
    assert "refused after" in result.stdout, result
    assert int(result.stdout.split()[2]) < 16
    assert await gone(tag) == []


def test_capped_buffer_keeps_head_and_tail_and_counts_the_rest() -> None:
    buf = CappedBuffer(100)
    for i in range(1000):
        buf.feed(f"{i:04d}".encode())
    text = buf.render()
    assert text.startswith("0000") and text.endswith("0999")
    assert buf.total == 4000 and buf.dropped == 4000 - 100
    assert f"[truncated {buf.dropped} bytes]" in text


def test_capped_buffer_under_cap_is_verbatim() -> None:
    buf = CappedBuffer(100)
    buf.feed(b"hello ")
    buf.feed(b"world")
    assert buf.render() == "hello world" and buf.dropped == 0


def test_the_command_line_holds_no_environment(ws: Workspace) -> None:
    """Variables reach code through bwrap's environment, never as arguments anyone can read."""
    config = SandboxConfig(extra_env={"DATA_TOKEN": "tok-secret-value"})
    fds = {area: 100 + i for i, area in enumerate(Area)}
    argv = BwrapRunner(config).argv(["true"], LIMITS, fds)
    assert "tok-secret-value" not in " ".join(argv) and "--setenv" not in argv


_VIEW = """
import json, os
def writable(path):
    try:
        with open(os.path.join(path, 'probe'), 'w') as f:
            f.write('x')
        return True
    except OSError as exc:
        return type(exc).__name__ + ':' + str(exc.errno)
print(json.dumps({
    'uid': os.getuid(), 'gid': os.getgid(),
    'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
    'input_file': open('/workspace/input/given.txt').read(),
    'writable': {p: writable(p) for p in
                 ['/', '/usr', '/etc', '/workspace', '/workspace/input',
                  '/workspace/scratchpad', '/workspace/output', '/tmp']},
    'etc': sorted(os.listdir('/etc')),
    'workspace': sorted(os.listdir('/workspace')),
    'home_seen': os.path.exists(HOME),
}))
"""


async def test_the_sandbox_sees_a_read_only_system_and_only_its_workspace(
    ws: Workspace, tmp_path: Path
) -> None:
    """uid 65534, its own processes only, the system and input read-only, scratchpad, output
    and /tmp writable, none of the service's data."""
    (ws.area_dir(Area.INPUT) / "given.txt").write_text("given")
    code = f"HOME = {str(tmp_path / 'home')!r}\n" + _VIEW
    result = await py(BwrapRunner(CONFIG), ws, code)
    assert result.ok, result
    seen = json.loads(result.stdout)
    assert (seen["uid"], seen["gid"]) == (65534, 65534)
    assert len(seen["pids"]) <= 3 and min(seen["pids"]) == 1  # bwrap's init, prlimit'd python
    assert seen["input_file"] == "given"
    writable = seen["writable"]
    for path in ("/", "/usr", "/etc", "/workspace", "/workspace/input"):
        assert writable[path] in ("OSError:30", "PermissionError:13"), (path, writable[path])
    for path in ("/workspace/scratchpad", "/workspace/output", "/tmp"):
        assert writable[path] is True, (path, writable[path])
    assert seen["workspace"] == ["input", "output", "scratchpad"]
    assert "shadow" not in seen["etc"] and "soong-agent" not in seen["etc"]
    assert seen["home_seen"] is False
    assert not (ws.area_dir(Area.INPUT) / "probe").exists()
