"""The general kinds the second blind set (``tests/data/memory/second``) missed after issue 37,
each in English and Chinese with sentences of its own (none is from a labelled set).

Every test failed on main before the change: a tool lesson scoped by the skill that owns the
tool, a role statement kept for the user, coordinated settings written apart, and a size
follow-up that replaces the rule it revises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core.bus.contracts.memory import Interaction as BusInteraction
from agent_core.bus.contracts.memory import InteractionSkill
from agent_core.skills import SkillCatalog
from agent_core.skills.model import Skill, SkillSource
from services.memory_extraction.service import to_batch_item
from services.run_worker.memory_link import skill_ownership
from tests.unit.memory.test_issue37_kinds import call, entries, result, said, user
from tests.unit.memory.test_issue37_kinds import remember as _remember


def remember(*interactions: list[dict[str, Any]] | str, skills: list[Any] | None = None) -> Any:
    """Documents after each interaction in turn; skills may carry the tools they own."""
    return _remember(*interactions, skills=skills)


def _lesson_turns(tool: str, ask: str) -> list[dict[str, Any]]:
    return [
        user(ask),
        said("", call("c1", tool, {"amount": "1,200.50"})),
        result("c1", tool, "amount must be a number, got a string", error=True),
        said("", call("c2", tool, {"amount": 1200.5})),
        result("c2", tool, "posted"),
    ]


def test_en_a_tool_lesson_belongs_to_the_skill_that_owns_the_tool() -> None:
    skills = [
        {"name": "ledger", "description": "Books journal entries", "tools": ["post_entry"]},
        {"name": "mailer", "description": "Sends e-mail digests"},
    ]
    docs = remember(_lesson_turns("post_entry", "Post the March accruals."), skills=skills)
    assert [scope for scope, _ in entries(docs)] == ["skill:ledger"]


def test_zh_ownership_sent_on_the_bus_scopes_the_lesson() -> None:
    """The run-worker's skills (with the tools their ``allowed_tools`` name) travel on the bus
    message and reach the lesson's scope."""
    skill = Skill(
        name="记账", description="登记凭证", source=SkillSource.USER, folder=Path("/x"),
        allowed_tools=("load_skill", "post_entry"),
    )  # fmt: skip
    sent = skill_ownership(["记账", "邮件"], SkillCatalog(skills={"记账": skill}))
    assert sent == [
        InteractionSkill(name="记账", description="登记凭证", tools=["post_entry"]),
        "邮件",
    ]
    message = BusInteraction.model_validate(
        {"interaction_id": "e", "account_id": "a", "session_id": "s", "run_id": "r",
         "turns": _lesson_turns("post_entry", "把三月的计提记上。"),
         "skills": [s if isinstance(s, str) else s.model_dump() for s in sent]}
    )  # fmt: skip
    ix = to_batch_item(message).interaction
    assert ix.tool_owners() == {"post_entry": "记账"}
    docs = remember(
        [t.model_dump(exclude_none=True) for t in ix.turns],
        skills=[{"name": "记账", "description": "登记凭证", "tools": ["post_entry"]}, "邮件"],
    )
    assert [scope for scope, _ in entries(docs)] == ["skill:记账"]


def test_en_a_role_statement_is_the_users_whatever_skill_is_in_use() -> None:
    skills = [{"name": "memo_writer", "description": "Write monthly business memos"}]
    text = "I'm the regional ops lead and I send a monthly business memo to the VP. Remember that."
    assert [scope for scope, _ in entries(remember(text, skills=skills))] == ["user"]


def test_zh_a_role_statement_is_the_users_whatever_skill_is_in_use() -> None:
    skills = [{"name": "brief", "description": "撰写季度经营简报"}]
    text = "我是西南区的渠道运营，每个季度要交一份经营简报。记住这个。"
    assert [scope for scope, _ in entries(remember(text, skills=skills))] == ["user"]


def test_en_a_slot_and_another_setting_are_written_apart() -> None:
    docs = remember(
        "From now on, use two decimals and put the legend at the bottom.",
        "From now on use one decimal.",
    )
    found = [text for _, text in entries(docs)]
    assert len(found) == 2
    assert any("legend" in t for t in found) and not any("two" in t for t in found)


def test_zh_a_slot_and_another_setting_are_written_apart() -> None:
    docs = remember("以后保留两位小数，图例放在底部。")
    assert sorted(text for _, text in entries(docs)) == ["以后保留两位小数", "图例放在底部"]


def test_en_a_size_follow_up_replaces_the_bound_it_revises() -> None:
    skills = [{"name": "memo_writer", "description": "Draft memos and export them to Word"}]
    docs = remember(
        "The memo body must stay within two pages, always.",
        "Still too long. Make it shorter, one page max. From now on.",
        skills=skills,
    )
    assert entries(docs) == [("skill:memo_writer", "Make it shorter, one page max")]


def test_zh_a_size_follow_up_replaces_the_bound_it_revises() -> None:
    skills = [{"name": "brief", "description": "撰写季度经营简报并导出 Word"}]
    docs = remember(
        "简报正文控制在三页以内，以后都这样。",
        "还是太长了，再精简一点，两页以内。以后照这个来。",
        skills=skills,
    )
    found = entries(docs)
    assert len(found) == 1 and found[0][0] == "skill:brief" and "两页" in found[0][1]
