"""The PostgreSQL writer's connection defaults: what a DSN already says is never said twice."""

from __future__ import annotations

import pytest

from services.storage_writer.backends.pg_connect import connection_defaults, settings_named


@pytest.mark.parametrize(
    "options",
    [
        "-c tcp_keepalives_idle=2",
        "-ctcp_keepalives_idle=2",
        "--tcp_keepalives_idle=2",
        "--tcp-keepalives-idle=2",  # the server reads a dash in a name as an underscore
        "-c statement_timeout=0 --TCP-KEEPALIVES-IDLE=2",
    ],
)
def test_a_server_setting_the_dsn_names_is_not_added_again(options: str) -> None:
    added = str(connection_defaults({"options": options})["options"])
    assert added.startswith(options)
    assert "tcp_keepalives_idle" not in added[len(options) :]
    assert "-c tcp_keepalives_interval=5" in added  # the ones it does not name still are


def test_a_name_that_only_contains_a_setting_does_not_count() -> None:
    assert settings_named("-c my_tcp_keepalives_idle=1 -c application_name=x") == {
        "my_tcp_keepalives_idle",
        "application_name",
    }
    added = str(connection_defaults({"options": "-c my_tcp_keepalives_idle=1"})["options"])
    assert "-c tcp_keepalives_idle=10" in added


def test_without_options_every_server_setting_is_asked_for() -> None:
    added = connection_defaults({})
    assert added["options"] == (
        "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 "
        "-c tcp_keepalives_count=3 -c tcp_user_timeout=30000"
    )
