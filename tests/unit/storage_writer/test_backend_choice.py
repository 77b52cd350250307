"""Choosing the storage backend: the setting, its refusal of unknown names, the version floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config import load_settings
from agent_core.errors import ConfigError, StorageError
from services.storage_writer.backends.pg_connect import check_version


def test_sqlite_stays_the_default(tmp_path: Path) -> None:
    settings = load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)})
    assert (settings.storage.backend, settings.storage.partitions) == ("sqlite", 1)


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[storage]\nbackend = "mysql"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"SOONG_AGENT_HOME": str(tmp_path)}, config_file=config)
    assert "storage.backend" in caught.value.message


def test_a_server_before_15_is_refused() -> None:
    check_version(150000)
    check_version(170002)
    with pytest.raises(StorageError) as caught:
        check_version(140011, "db:5432/soong")
    assert caught.value.code == "postgres_too_old"
    assert "version 14" in caught.value.message
