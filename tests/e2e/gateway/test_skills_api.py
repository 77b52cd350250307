"""``GET /v1/sessions/{id}/skills`` over HTTP and through the SDK: the skills in effect with their
problems, the session's ``enabled_skills``, and another account's session answering 404."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import soong_agent
from tests.e2e.gateway.conftest import Gw, new_session


def _write(root: Path, name: str, front: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "SKILL.md").write_text(f"---\n{front}\n---\nBody of {name}.\n")


@pytest.fixture
def user_skills(gw: Gw) -> Iterator[Path]:
    """Account A's skill folder, removed afterwards (the stack is shared with other tests)."""
    folder = gw.stack.home / "accounts" / "dev" / "skills"
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_skills_of_a_session(gw: Gw, user_skills: Path) -> None:
    home = gw.stack.home
    user = user_skills
    _write(user, "charts", "name: charts\ndescription: Draw charts.\nallowed_tools: [run_python]")
    _write(user, "quiet", "name: quiet\ndescription: Hidden.\ndisable-model-invocation: true")
    _write(user, "broken", "name: broken\ndescription: [oops")
    with gw.client() as a, gw.client(gw.key_b) as b:
        sid = new_session(a)
        project = home / "accounts" / "dev" / "sessions" / sid / ".soong-agent" / "skills"
        _write(project, "charts", "name: charts\ndescription: The project's charts.")
        _write(project, "notes", "name: notes\ndescription: Take notes.")
        listed = a.get(f"/v1/sessions/{sid}/skills")
        assert listed.status_code == 200, listed.text
        body = listed.json()
        items = {s["name"]: s for s in body["items"]}
        assert list(items) == ["charts", "quiet", "notes"]  # user's first, then the project's
        assert items["charts"] == {
            "name": "charts",
            "description": "Draw charts.",
            "source": "user",
            "model_invocable": True,
            "allowed_tools": ["run_python"],
        }
        assert items["quiet"]["model_invocable"] is False
        assert items["notes"]["source"] == "project"
        problems = {(p["path"], p["code"]) for p in body["problems"]}
        assert problems == {("broken/SKILL.md", "invalid_yaml"), ("charts/SKILL.md", "shadowed")}
        assert all(str(home) not in p["reason"] for p in body["problems"])  # no server paths

        # The session's enabled_skills: only those are in effect.
        only = new_session(a, agent_config={"enabled_skills": ["notes"]})
        assert [s["name"] for s in a.get(f"/v1/sessions/{only}/skills").json()["items"]] == []
        # (``notes`` is in the first session's project, not this one's)

        # Another account's session, or none at all: 404, nothing of A's.
        foreign = b.get(f"/v1/sessions/{sid}/skills")
        assert foreign.status_code == 404 and "charts" not in foreign.text

    with soong_agent.Client(gw.stack.gateway_url, gw.stack.api_key) as client:
        skills = client.session(sid).skills()
        assert [s.name for s in skills.items] == ["charts", "quiet", "notes"]
        assert {p.code for p in skills.problems} == {"invalid_yaml", "shadowed"}
