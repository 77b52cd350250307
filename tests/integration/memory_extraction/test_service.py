"""The memory-extraction service on a real Valkey: enqueue → debounce → files; render/read/write.

Each test runs once per file-store engine: the home's folders (``local``) and a bucket of a real
S3-compatible server (``s3``: moto, one per test session); what the service wrote is read back
through the same engine."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.memory import Interaction, InteractionTurn
from agent_core.bus.names import memory_bucket
from agent_core.config import load_settings
from agent_core.config.files import S3Settings
from agent_core.errors import SchemaError, StorageError
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.files.s3 import S3FileStore
from agent_core.memory import INJECTION_HEADINGS
from agent_core.memory.client import PRECONDITION_FAILED, MemoryClient, publish_interaction
from agent_core.service import ServiceContext, run_service
from services.memory_extraction.service import build
from tests.engines.s3 import MotoS3
from tests.integration.bus.helpers import wait_for

USER_MD = "accounts/acme/memory/user.md"


@pytest.fixture(params=["local", "s3"])
def files(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FileStore:
    """The engine the service is configured with, and a client of it for the test's checks."""
    if request.param == "local":
        return LocalFileStore(tmp_path)
    server: MotoS3 = request.getfixturevalue("s3_server")
    settings = S3Settings(bucket=server.new_bucket("memory-service"), prefix=secrets.token_hex(6))
    (tmp_path / "files.toml").write_text(
        f'[files]\nengine = "s3"\n[files.s3]\nbucket = "{settings.bucket}"\n'
        f'prefix = "{settings.prefix}"\n'
    )
    for name, value in server.env().items():  # the service reads the standard AWS variables
        monkeypatch.setenv(name, value)
    return S3FileStore(settings, env=server.env())


async def _text(files: FileStore, key: str) -> str:
    return (await files.get(key))[0].decode()


async def _exists(files: FileStore, key: str) -> bool:
    return await files.head(key) is not None


@pytest.fixture
async def service(
    redis_url: str, names: BusNames, tmp_path: Path, files: FileStore
) -> AsyncIterator[tuple[ServiceContext, MemoryClient]]:
    engine = tmp_path / "files.toml"
    (tmp_path / "config.toml").write_text(
        "[memory]\ndebounce_s = 0.3\n[model]\napi_key_env = 'SOONG_TEST_NO_SUCH_KEY'\n"
        + (engine.read_text() if engine.exists() else "")
    )
    env = {
        "SOONG_AGENT_HOME": str(tmp_path),
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
    }
    settings = load_settings(env=env)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_service(build, settings, "memory_extraction", "0", stop=stop, configure_logging=False)
    )
    client_ctx = ServiceContext(settings, "tester", "0")
    await client_ctx.rpc.start()
    try:
        yield client_ctx, MemoryClient(client_ctx.rpc, names, timeout_s=10)
    finally:
        stop.set()
        async with asyncio.timeout(30):
            assert await task == 0
        await client_ctx.rpc.stop()
        await client_ctx.bus.aclose()


def interaction(n: int, text: str, skills: list[str] | None = None) -> Interaction:
    return Interaction(
        interaction_id=f"ix_{n}",
        account_id="acme",
        session_id="sess_1",
        run_id=f"run_{n}",
        turns=[InteractionTurn(role="user", content=text),
               InteractionTurn(role="assistant", content="好的，我记住了：都用美元。")],
        skills=skills or [],
    )  # fmt: skip


async def test_interactions_become_memory_after_the_debounce_and_render_for_a_run(
    service: tuple[ServiceContext, MemoryClient], files: FileStore, names: BusNames
) -> None:
    ctx, client = service
    assert await client.render("acme", []) == ""
    await publish_interaction(ctx.bus, names, interaction(1, "以后日期统一用 YYYY-MM-DD。"))
    await publish_interaction(
        ctx.bus, names, interaction(2, "报表的结论放在最前面，记住。", ["report"])
    )
    await publish_interaction(ctx.bus, names, interaction(3, "以后日期统一用 YYYY-MM-DD。"))
    # A duplicate delivery of the same interaction must change nothing.
    await publish_interaction(ctx.bus, names, interaction(3, "以后日期统一用 YYYY-MM-DD。"))
    skill_md = "accounts/acme/memory/skills/report.md"
    await wait_for(lambda: _exists(files, skill_md), timeout_s=15)
    await wait_for(lambda: _exists(files, USER_MD), timeout_s=15)
    user_text = await _text(files, USER_MD)
    assert user_text.count("YYYY-MM-DD") == 1
    assert "scope: user" in user_text
    text = await client.render("acme", ["report"])
    assert text.startswith(INJECTION_HEADINGS["zh"])  # the user writes Chinese
    assert "YYYY-MM-DD" in text and "结论" in text and "美元" not in text
    assert "<!--" not in text  # machine fields never reach the prompt
    assert "结论" not in await client.render("acme", [])  # only the run's enabled skills
    # Pending state is gone once consolidated.
    await wait_for(lambda: _drained(ctx, names), timeout_s=5)


async def test_a_memory_model_without_its_key_is_named_once_and_rules_still_work(
    caplog: pytest.LogCaptureFixture,
    service: tuple[ServiceContext, MemoryClient],
    files: FileStore,
    names: BusNames,
) -> None:
    # caplog is set up before the service, so the start-up warning is in the setup records.
    ctx, _ = service

    def warnings() -> list[str]:
        records = caplog.get_records("setup") + caplog.records
        return [r.getMessage() for r in records if r.levelno == logging.WARNING]

    await publish_interaction(ctx.bus, names, interaction(1, "以后金额都用美元。"))
    await wait_for(lambda: _exists(files, USER_MD), timeout_s=15)
    assert "美元" in await _text(files, USER_MD)  # consolidated by rules, without a model
    named = [m for m in warnings() if "SOONG_TEST_NO_SUCH_KEY" in m]
    assert named == [
        "the memory model has no key (SOONG_TEST_NO_SUCH_KEY is not set): "
        "consolidating with rules only"
    ]


async def test_gateway_read_write_with_etags(
    service: tuple[ServiceContext, MemoryClient], files: FileStore
) -> None:
    _, client = service
    empty = await client.read("acme", "user")
    assert empty.content == "" and empty.etag is None
    first = await client.write("acme", "user", "- 金额用万元\n", if_match=None)
    assert first.etag is not None
    again = await client.read("acme", "user")
    # The user's lines are kept exactly; the frontmatter (ids, updated_at) is the service's.
    assert again.etag == first.etag and again.content == first.content
    assert again.content.startswith("---\n") and again.content.endswith("\n---\n- 金额用万元\n")
    second = await client.write("acme", "user", "- 金额用亿元\n", if_match=first.etag)
    with pytest.raises(StorageError) as stale:
        await client.write("acme", "user", "- 金额用元\n", if_match=first.etag)
    assert stale.value.code == PRECONDITION_FAILED
    with pytest.raises(SchemaError) as secret:
        await client.write(
            "acme", "user", "- 我的密码是 password: hunter2hunter2\n", if_match=second.etag
        )
    assert secret.value.code == "memory_contains_secret"
    with pytest.raises(SchemaError):
        await client.read("../../etc", "user")
    assert "亿元" in (await client.read("acme", "user")).content
    log = await _text(files, "accounts/acme/memory/changes.jsonl")
    assert '"mode": "api"' in log and "hunter2" not in log


async def _drained(ctx: ServiceContext, names: BusNames) -> bool:
    return int(await ctx.redis.llen(names.memory_pending("acme"))) == 0 and not (
        await ctx.redis.zcard(names.memory_due(memory_bucket("acme")))
    )
