"""An account's own skills in the file store, on both engines: installed through one host's
client, scanned and read on another host's disk (``agent_core.skills.store``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_core.config.files import S3Settings
from agent_core.errors import SchemaError, ToolError
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.files.s3 import S3FileStore
from agent_core.skills import read_skill_file, scan_skills, skill_folders
from agent_core.skills.store import account_skills_key, hydrate_account_skills, install_skill
from tests.engines.s3 import MotoS3

ACCOUNT = "acct_sk"


def skill_md(description: str) -> bytes:
    return f"---\nname: report\ndescription: {description}\n---\nWrite the report.\n".encode()


@pytest.fixture(params=["local", "s3"])
def hosts(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileStore, FileStore, Path]:
    """Host A's client, host B's client and host B's home (one home on one host for ``local``)."""
    if request.param == "local":
        return LocalFileStore(tmp_path), LocalFileStore(tmp_path), tmp_path
    server: MotoS3 = request.getfixturevalue("s3_server")
    bucket = server.new_bucket("skills-files")
    settings = S3Settings(bucket=bucket, prefix=f"t{abs(hash(request.node.nodeid)) % 10**9}")
    new: Callable[[], FileStore] = lambda: S3FileStore(settings, env=server.env())  # noqa: E731
    return new(), new(), tmp_path / "host-b"


def catalog_descriptions(home: Path) -> dict[str, str]:
    found = scan_skills(skill_folders(home=home, account_id=ACCOUNT, project=None))
    return {name: skill.description for name, skill in found.skills.items()}


async def test_a_skill_installed_on_one_host_is_scanned_and_read_on_another(
    hosts: tuple[FileStore, FileStore, Path],
) -> None:
    host_a, host_b, home_b = hosts
    await install_skill(
        host_a, ACCOUNT, "report", {"SKILL.md": skill_md("Reports."), "ref/style.md": b"# Style\n"}
    )
    await hydrate_account_skills(host_b, home_b, ACCOUNT)
    assert catalog_descriptions(home_b) == {"report": "Reports."}
    folder = home_b / "accounts" / ACCOUNT / "skills" / "report"
    assert read_skill_file(folder, "ref/style.md") == "# Style\n"

    # A new install replaces the old one everywhere: its description, and a file it dropped.
    await install_skill(host_a, ACCOUNT, "report", {"SKILL.md": skill_md("Better reports.")})
    assert [o.key for o in await host_a.list(account_skills_key(ACCOUNT), limit=10)] == [
        f"{account_skills_key(ACCOUNT)}/report/SKILL.md"
    ]
    await hydrate_account_skills(host_b, home_b, ACCOUNT)
    assert catalog_descriptions(home_b) == {"report": "Better reports."}
    with pytest.raises(ToolError) as gone:
        read_skill_file(folder, "ref/style.md")
    assert gone.value.code == "not_found"


async def test_the_copy_leaves_hand_placed_files_and_refuses_bad_installs(
    hosts: tuple[FileStore, FileStore, Path],
) -> None:
    host_a, host_b, home_b = hosts
    mine = home_b / "accounts" / ACCOUNT / "skills" / "mine" / "SKILL.md"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"---\nname: mine\ndescription: By hand.\n---\nx\n")
    await install_skill(host_a, ACCOUNT, "report", {"SKILL.md": skill_md("Reports.")})
    await hydrate_account_skills(host_b, home_b, ACCOUNT)
    await host_a.delete([f"{account_skills_key(ACCOUNT)}/report/SKILL.md"])
    await hydrate_account_skills(host_b, home_b, ACCOUNT)
    assert catalog_descriptions(home_b) == {"mine": "By hand."}
    with pytest.raises(SchemaError):
        await install_skill(host_a, ACCOUNT, "Bad Name", {"SKILL.md": b"x"})
    with pytest.raises(SchemaError):
        await install_skill(host_a, ACCOUNT, "report", {"notes.md": b"x"})
    with pytest.raises(Exception) as climbs:
        await install_skill(host_a, ACCOUNT, "report", {"SKILL.md": b"x", "../../x.md": b"x"})
    assert getattr(climbs.value, "code", "") == "invalid_key"
