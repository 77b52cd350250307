"""The provider configurations of ``docs/providers.md``, as written there: each reaches its
wire-faithful fake server with the key from the variable the document names, through the
run-worker's own way of building a provider (``agent_config`` and ``provider_settings``), and
start-up refuses a hosted one whose key variable is unset, naming it (README and docs promise it).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agent_core.config import agent_config, load_settings
from agent_core.config.providers import check_model_keys
from agent_core.errors import ConfigError
from agent_core.provider import ProviderRegistry, aclose_adapter
from services.run_worker.agent_setup import provider_settings
from tests.conftest import REPO
from tests.fakes.script import Finish, ScriptedTurn, Text, Usage
from tests.integration.provider.harness import collect, request, sdk_base_url, server_for, text_of

DOC = REPO / "docs" / "providers.md"
_BLOCK = re.compile(r"```toml\n# providers\.md: (?P<name>[\w-]+)\n(?P<body>.*?)```", re.S)


def _documented() -> dict[str, str]:
    return {m["name"]: m["body"] for m in _BLOCK.finditer(DOC.read_text())}


def _settings(home: Path, toml: str, env: dict[str, str]) -> Any:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(toml)
    return load_settings(env={"SOONG_AGENT_HOME": str(home), **env})


def test_the_document_has_a_config_for_each_kind_and_a_local_server() -> None:
    blocks = _documented()
    assert {"openai", "anthropic", "ollama", "openai-compatible", "local-small", "named"} <= set(
        blocks
    )
    for body in blocks.values():
        tomllib.loads(body)  # each parses as it is written


def test_the_readme_shows_the_tested_config_of_each_kind() -> None:
    # The README's blocks carry the same marker: each must be the document's (tested) block.
    readme = {m["name"]: m["body"] for m in _BLOCK.finditer((REPO / "README.md").read_text())}
    assert {"openai", "anthropic", "ollama", "openai-compatible"} <= set(readme)
    documented = _documented()
    assert {name: documented.get(name) for name in readme} == readme


# (documented block, provider kind, the key variable the document names)
CASES = [
    ("openai", "openai", "OPENAI_API_KEY"),
    ("anthropic", "anthropic", "ANTHROPIC_API_KEY"),
    ("ollama", "ollama", None),
    ("openai-compatible", "openai", "VLLM_API_KEY"),
]
# Where an SDK puts the key (Anthropic's SDK: x-api-key, or a bearer token in newer versions).
_AUTH = ("authorization", "x-api-key")


@pytest.mark.parametrize(("block", "kind", "variable"), CASES)
async def test_a_documented_config_reaches_its_server_with_its_own_key(
    tmp_path: Path, block: str, kind: str, variable: str | None
) -> None:
    turn = ScriptedTurn(
        steps=[Text(text="hello"), Usage(input_tokens=3, output_tokens=1), Finish()]
    )
    server = server_for(kind, [turn])
    async with server:
        doc = tomllib.loads(_documented()[block])
        doc["model"]["base_url"] = sdk_base_url(server)  # the fake stands in for the endpoint
        toml = "[model]\n" + "".join(
            f"{k} = {v!r}\n".replace("'", '"') for k, v in doc["model"].items()
        )
        # Only the documented variable holds a key; the other kind's variable holds a decoy.
        env = {"OPENAI_API_KEY": "decoy-openai", "ANTHROPIC_API_KEY": "decoy-anthropic"}
        if variable is not None:
            env[variable] = f"key-for-{block}"
        settings = _settings(tmp_path / "home", toml, {})
        config = agent_config(settings, {})
        adapter = ProviderRegistry().create(provider_settings(config, settings, env))
        try:
            events = await collect(adapter, request().model_copy(update={"model": config.model}))
        finally:
            await aclose_adapter(adapter)
        assert text_of(events) == "hello"
        sent = server.requests[0].headers
        keys = " ".join(sent.get(h, "") for h in _AUTH)
        if variable is None:
            assert "decoy" not in keys and "key-for" not in keys
        else:
            assert f"key-for-{block}" in keys and "decoy" not in keys


@pytest.mark.parametrize(
    ("block", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_a_hosted_provider_without_its_key_refuses_to_start_naming_the_variable(
    tmp_path: Path, block: str, variable: str
) -> None:
    settings = _settings(tmp_path / "home", _documented()[block], {})
    with pytest.raises(ConfigError) as refused:
        check_model_keys(settings, {"UNRELATED": "x"})
    assert refused.value.code == "model_key_missing"
    assert variable in refused.value.message and "make demo" in refused.value.message
    check_model_keys(settings, {variable: "set"})  # with it: nothing to say


def test_a_named_provider_without_its_key_is_named_too(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home", _documented()["named"], {})
    with pytest.raises(ConfigError) as refused:
        check_model_keys(settings, {"OPENAI_API_KEY": "set"})
    assert refused.value.details["variables"] == ["ANTHROPIC_API_KEY"]
    assert "providers.claude (anthropic)" in refused.value.message
    check_model_keys(settings, {"OPENAI_API_KEY": "a", "ANTHROPIC_API_KEY": "b"})


def test_servers_of_ones_own_need_no_key_unless_the_config_names_a_variable(tmp_path: Path) -> None:
    local = _settings(tmp_path / "a", _documented()["ollama"], {})
    check_model_keys(local, {})
    compatible = _settings(tmp_path / "b", _documented()["openai-compatible"], {})
    with pytest.raises(ConfigError, match="VLLM_API_KEY"):
        check_model_keys(compatible, {})
    no_key = _settings(
        tmp_path / "c", '[model]\nprovider = "openai"\nbase_url = "http://10.0.0.5:8000/v1"\n', {}
    )
    check_model_keys(no_key, {})


# The address column of the document's table, and the address each adapter's client goes to when
# the config names no base_url (the SDKs' own defaults for the hosted APIs).
_DEFAULT_ADDRESS = {
    "ollama": ("`http://127.0.0.1:11434`", "http://127.0.0.1:11434"),
    "openai": ("the OpenAI API", "https://api.openai.com/v1/"),
    "anthropic": ("the Anthropic API", "https://api.anthropic.com"),
}


@pytest.mark.parametrize("kind", sorted(_DEFAULT_ADDRESS))
async def test_without_a_base_url_each_kind_goes_where_the_document_says(
    tmp_path: Path, kind: str
) -> None:
    documented, address = _DEFAULT_ADDRESS[kind]
    row = next(line for line in DOC.read_text().splitlines() if line.startswith(f"| `{kind}` |"))
    assert row.rstrip(" |").endswith(documented), row
    settings = _settings(tmp_path / "home", f'[model]\nprovider = "{kind}"\n', {})
    config = agent_config(settings, {})
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    adapter: Any = ProviderRegistry().create(provider_settings(config, settings, env))
    try:
        assert str(adapter._get_client().base_url) == address
    finally:
        await aclose_adapter(adapter)
