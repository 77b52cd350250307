"""Every script and transaction of the bus keeps to one Cluster slot.

A Valkey Cluster refuses a script or ``MULTI`` whose keys live in two slots (``CROSSSLOT``) and a
script that touches a key it was not given ("non local key"). The names of keys used together
carry one hash tag (``agent_core.bus.names``); this checks the groups the code uses together, for
many ids, and that no Lua script builds a key name from its arguments.
"""

from __future__ import annotations

import re
import secrets

import pytest
from redis.crc import key_slot

from agent_core.bus.names import LANE_BUCKETS, BusNames, lane_bucket, memory_bucket
from agent_core.ids import new_id, new_session_id
from agent_core.runqueue import fifo
from services.gateway import auth, limits
from services.memory_extraction import queue

_NAMES = BusNames("soong")


def _one_slot(keys: list[str]) -> bool:
    return len({key_slot(k.encode()) for k in keys}) == 1


def test_a_lanes_scripts_and_the_enqueue_transaction_keep_to_one_slot() -> None:
    for _ in range(200):
        session = new_session_id()
        for lane in (session, f"{session}.{new_id('run')}"):  # a branch lane beside its session
            keys = [
                _NAMES.session_lease(lane),
                _NAMES.session_fifo(lane),
                _NAMES.session_processing(lane),
                _NAMES.lanes_due(lane),
            ]
            assert _one_slot(keys), keys
        assert lane_bucket(session) == lane_bucket(f"{session}.x")


def test_the_lane_buckets_spread_over_every_due_set() -> None:
    buckets = {lane_bucket(new_session_id()) for _ in range(2000)}
    assert buckets == set(range(LANE_BUCKETS))
    assert len({key_slot(k.encode()) for k in _NAMES.all_lanes_due}) == LANE_BUCKETS


def test_run_account_and_auth_groups_keep_to_one_slot() -> None:
    for _ in range(100):
        run_id = new_id("run")
        # The control channel too: the cancel flag and its signal go to one node, in order.
        assert _one_slot(
            [_NAMES.run_attempt(run_id), _NAMES.run_cancel(run_id), _NAMES.run_control(run_id)]
        )
        digest = secrets.token_hex(8)
        assert _one_slot([_NAMES.api_keys, _NAMES.rate_limit(digest), _NAMES.api_keys_used])
        account = f"acct_{secrets.token_hex(4)}"
        bucket = memory_bucket(account)
        assert _one_slot(
            [
                _NAMES.memory_pending(account),
                _NAMES.memory_due(bucket),
                _NAMES.memory_first(bucket),
                _NAMES.memory_lock(account),
                _NAMES.memory_failed(account),
            ]
        )


_SCRIPTS = {
    "fifo": [v for k, v in vars(fifo).items() if k.startswith("_") and isinstance(v, str)],
    "auth": [auth._SCRIPT],
    "limits": [limits._ACQUIRE, limits._RELEASE, limits._BEAT],
    "memory": [queue._PUSH, queue._TRIM, queue._UNLOCK],
}
# redis.call('<command>', <first key>: a key-taking command's first argument.
_CALL = re.compile(r"redis\.call\('([A-Z]+)',\s*([^,)]+)")
_NO_KEY = {"TIME"}


@pytest.mark.parametrize("module", sorted(_SCRIPTS))
def test_scripts_touch_only_the_keys_they_were_given(module: str) -> None:
    calls = [c for text in _SCRIPTS[module] if "redis.call" in text for c in _CALL.findall(text)]
    assert calls, module
    for command, first in calls:
        if command not in _NO_KEY:
            assert first.strip().startswith("KEYS["), (module, command, first)


def test_a_control_channel_names_its_run_tagged_or_as_older_versions_did() -> None:
    run_id = new_id("run")
    assert _NAMES.run_control(run_id) == f"soong:control:{{{run_id}}}"
    assert _NAMES.control_run(_NAMES.run_control(run_id)) == run_id
    assert _NAMES.control_run(f"soong:control:{run_id}") == run_id  # an older publisher's
