"""Settings: defaults, config.toml, environment overrides, and errors that name key and file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core.config import ENV_VARS, load_settings
from agent_core.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]


def test_defaults_without_a_file(tmp_path: Path) -> None:
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.db_path == tmp_path / "sessions.sqlite"
    assert settings.bus.redis_url is None
    assert settings.model.provider == "openai"
    # A permission request nobody decides is denied after ten minutes (the lane is not held).
    assert settings.run_worker.permission_timeout_s == 600


def test_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[gateway]\nport = 9000\n[bus]\nnamespace = "prod"\n')
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path),
            "SOONG_GATEWAY_PORT": "9100",
            "SOONG_REDIS_URL": "redis://r:6379",
        }
    )
    assert settings.gateway.port == 9100  # the environment wins over the file
    assert settings.bus.namespace == "prod"
    assert settings.bus.redis_url == "redis://r:6379"


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[gateway]\nprot = 9000\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert info.value.details["key"] == "gateway.prot"
    assert str(path) in info.value.message


def test_bad_value_from_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path), "SOONG_GATEWAY_PORT": "eighty"})
    assert info.value.details["key"] == "gateway.port"
    assert "SOONG_GATEWAY_PORT" in info.value.message


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[gateway\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert info.value.code == "config_unreadable"


def test_example_config_is_valid_and_complete(tmp_path: Path) -> None:
    example = REPO / "deploy" / "config.example.toml"
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=example)
    assert settings.gateway.port == 8720
    text = example.read_text()
    for var in ENV_VARS:  # every override is documented in the example
        assert var in text, var


def test_every_env_var_maps_to_a_settings_key(tmp_path: Path) -> None:
    values = {
        "SOONG_AGENT_HOME": str(tmp_path),
        "SOONG_REDIS_URL": "redis://x:1",
        "SOONG_NAMESPACE": "abc",
        "SOONG_LOG_LEVEL": "DEBUG",
        "SOONG_DEBUG": "true",
        "SOONG_GATEWAY_HOST": "0.0.0.0",
        "SOONG_GATEWAY_PORT": "1234",
        "SOONG_DB_PATH": str(tmp_path / "db.sqlite"),
        "SOONG_WRITER_STANDBY": "true",
        "SOONG_FILES_ENGINE": "local",
        "SOONG_STORAGE_BACKEND": "postgres",
        "SOONG_STORAGE_PARTITIONS": "3",
        "SOONG_MODEL_PROVIDER": "anthropic",
        "SOONG_MODEL_NAME": "m",
        "SOONG_MODEL_BASE_URL": "http://127.0.0.1:1",
        "SOONG_MODEL_API_KEY_ENV": "ANTHROPIC_API_KEY",
        "SOONG_LOG_FORMAT": "json",
        "SOONG_OPS_HOST": "0.0.0.0",
        "SOONG_OPS_PORT": "9464",
        "SOONG_OTLP_ENDPOINT": "http://127.0.0.1:4318",
    }
    assert set(values) == set(ENV_VARS)
    s = load_settings(env=values)
    assert s.storage.standby is True
    assert s.storage.backend == "postgres"
    assert s.storage.partitions == 3
    assert (s.bus.namespace, s.log_level, s.gateway.host, s.gateway.port, s.debug) == (
        "abc",
        "DEBUG",
        "0.0.0.0",
        1234,
        True,
    )
    assert (s.db_path, s.model.provider, s.model.name, s.model.base_url) == (
        tmp_path / "db.sqlite",
        "anthropic",
        "m",
        "http://127.0.0.1:1",
    )
    obs = s.observability
    assert (obs.log_format, obs.ops_host, obs.ops_port, obs.otlp_endpoint) == (
        "json",
        "0.0.0.0",
        9464,
        "http://127.0.0.1:4318",
    )
    assert s.model.api_key_env == "ANTHROPIC_API_KEY"


def test_every_problem_is_reported_at_once_with_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[gateway]\nprot = 9000\n[modle]\nname = "x"\n[memory.model]\nnmae = "m"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path), "SOONG_OPS_PORT": "many"})
    message = info.value.message
    assert message.startswith("4 problems:")
    assert "gateway.prot: unknown key (did you mean gateway.port?)" in message
    assert "modle: unknown key (did you mean model?)" in message
    assert "memory.model.nmae: unknown key (did you mean memory.model.name?)" in message
    assert "environment variable SOONG_OPS_PORT: observability.ops_port" in message
    assert len(info.value.details["problems"]) == 4


def test_soong_config_names_the_file(tmp_path: Path) -> None:
    mounted = tmp_path / "etc" / "config.toml"
    mounted.parent.mkdir()
    mounted.write_text('[observability]\nlog_format = "json"\n')
    env = {"SOONG_AGENT_HOME": str(tmp_path / "home"), "SOONG_CONFIG": str(mounted)}
    assert load_settings(env=env).observability.log_format == "json"
    missing = {**env, "SOONG_CONFIG": str(tmp_path / "absent.toml")}
    assert load_settings(env=missing).observability.log_format == "text"  # optional: defaults


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ('{ SOONG_REDIS_URL = "redis://x" }', "the service's own"),
        ('{ OPENAI_API_KEY = "sk-x" }', "holds a provider key"),
        ('{ "A-B" = "x" }', "not a variable name"),
    ],
)
def test_code_never_gets_the_service_secrets(tmp_path: Path, env: str, says: str) -> None:
    (tmp_path / "config.toml").write_text(f"[sandbox]\nenv = {env}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert says in info.value.message


def test_sandbox_refuses_to_show_the_data(tmp_path: Path) -> None:
    from agent_core.tools.sandbox.setup import sandbox_config

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[sandbox]\nread_only_paths = ["{tmp_path}"]\n')
    settings = load_settings(env={"SOONG_AGENT_HOME": str(home)})
    with pytest.raises(ValueError, match="would show the service's data"):
        sandbox_config(settings)


@pytest.mark.parametrize(
    ("sandbox", "says"),
    [
        ('network = true\nallowed_hosts = ["data.example.org"]', "choose one"),
        ('allowed_hosts = ["data.example.org/simple"]', "sandbox.allowed_hosts"),
        ('allowed_hosts = ["*"]', "wildcard"),
    ],
)
def test_allowed_hosts_are_names_and_exclude_the_whole_network(
    tmp_path: Path, sandbox: str, says: str
) -> None:
    (tmp_path / "config.toml").write_text(f"[sandbox]\n{sandbox}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert says in info.value.message


@pytest.mark.parametrize(
    "url", ["unix://run/valkey.sock", "unix:///", "redis://", "valkey:6379", "http://valkey:6379"]
)
def test_the_bus_url_must_be_redis_rediss_or_a_unix_sockets(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path), "SOONG_REDIS_URL": url})
    assert "SOONG_REDIS_URL" in err.value.message and "rediss://" in err.value.message
    assert "unix://" in err.value.message


@pytest.mark.parametrize("url", ["unix:///run/valkey.sock", "unix://:p%40w@/run/v.sock?db=2"])
def test_a_unix_socket_bus_loads_as_one_node(tmp_path: Path, url: str) -> None:
    env = {"SOONG_AGENT_HOME": str(tmp_path), "SOONG_REDIS_URL": url}
    bus = load_settings(env=env).bus
    assert (bus.redis_url, bus.topology) == (url, "standalone")
    (tmp_path / "config.toml").write_text('[bus]\ntopology = "cluster"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    assert "one node on this host" in json.dumps(err.value.details) + err.value.message


def test_a_tls_bus_with_its_files_and_the_topologies_load(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("ca")
    (tmp_path / "config.toml").write_text(
        '[bus]\nredis_url = "rediss://:pw@valkey.example:6380"\ntopology = "sentinel"\n'
        'sentinels = ["10.0.0.1:26379", "sentinel-b:26379"]\nsentinel_master = "soong"\n'
        f'[bus.tls]\nca_file = "{tmp_path / "ca.pem"}"\n'
    )
    bus = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}).bus
    assert (bus.topology, bus.sentinel_master, bus.tls.ca_file) == (
        "sentinel",
        "soong",
        tmp_path / "ca.pem",
    )


@pytest.mark.parametrize(
    ("bus", "says"),
    [
        ('topology = "sentinel"', "needs sentinels"),
        ('topology = "cluster"\nsentinel_master = "m"', 'topology "sentinel" only'),
        ('topology = "sentinel"\nsentinels = ["nohost"]\nsentinel_master = "m"', "host:port"),
        ('[bus.tls]\nca_file = "/nonexistent/ca.pem"', "no such file"),
        ('[bus.tls]\nca_file = "CA"', "not a rediss:// URL"),
        ('[bus.tls]\ncert_file = "CA"', "go together"),
    ],
)
def test_a_bus_whose_parts_do_not_fit_is_refused_at_start(
    tmp_path: Path, bus: str, says: str
) -> None:
    (tmp_path / "CA").write_text("ca")
    scheme = "rediss" if "cert_file" in bus else "redis"
    bus = bus.replace('"CA"', f'"{tmp_path / "CA"}"')
    head, _, tls = bus.partition("[bus.tls]")
    text = f'[bus]\nredis_url = "{scheme}://valkey:6379"\n{head}\n'
    if tls:
        text += f"[bus.tls]{tls}\n"
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert says in json.dumps(err.value.details) + err.value.message, err.value.details


def test_plain_redis_urls_with_password_and_db_are_fine(tmp_path: Path) -> None:
    url = "redis://:s3cret@valkey:6379/2"
    env = {"SOONG_AGENT_HOME": str(tmp_path), "SOONG_REDIS_URL": url}
    assert load_settings(env=env).bus.redis_url == url


def test_the_readme_names_every_environment_variable() -> None:
    readme = (REPO / "README.md").read_text()
    configuration = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert [v for v in ENV_VARS if f"`{v}`" not in configuration] == []


def test_partitions_beyond_one_need_postgres(tmp_path: Path) -> None:
    env = {"SOONG_AGENT_HOME": str(tmp_path), "SOONG_STORAGE_PARTITIONS": "4"}
    with pytest.raises(ConfigError) as info:
        load_settings(env=env)
    assert info.value.code == "config_invalid"
    assert 'needs backend = "postgres"' in info.value.message
    settings = load_settings(env={**env, "SOONG_STORAGE_BACKEND": "postgres"})
    assert settings.storage.partitions == 4
