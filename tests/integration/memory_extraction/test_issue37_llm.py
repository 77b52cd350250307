"""Issue 37's kinds through the LLM path: the scripted model (the oracle) against the real adapter.

The oracle writes only what the detector put in the prompt and judges it by the labels, so each
case checks that the pipeline hands a model what the kind needs (the neighbour's rule, the agent's
described change or changed call, the skill a description names, a revision, a cause) and that
the guards keep secrets and superseded values out of what the model writes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.memory.evaluation import EpisodeLabels
from agent_core.provider import ProviderRegistry, ProviderSettings, aclose_adapter
from services.memory_extraction.llm import LLMProposer
from services.memory_extraction.replay import replay_episode
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.memory_extraction.oracle import Oracle


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": list(calls)}


def t(cid: str, name: str, content: str, error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "tool_name": name, "content": content,
            "is_error": error}  # fmt: skip


def c(cid: str, name: str, args: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "arguments": args}


def ix(*turns: dict[str, Any] | str, skills: list[Any] | None = None) -> dict[str, Any]:
    return {"turns": [u(x) if isinstance(x, str) else x for x in turns], "skills": skills or []}


GANTT = [{"name": "gantt", "description": "项目甘特图：根据任务清单生成排期图（gantt_draw）"}]
FORECAST = [{"name": "forecast", "description": "Time-series churn and demand forecasting."}]
RAW = '{"rows": [1, 2,]}'

# id → (interactions, labels)
CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "1-en": (
        [ix("Cap every warehouse result at 2,000 rows. Don't make me say it twice.", skills=["sql"])],
        {"expected": [{"scope": ["skill:sql", "user"], "all": ["2,000"]}],
         "absent": [{"scope": "*", "kind": "quotation", "all": ["twice"]}]},
    ),
    "1-zh": (
        [ix("周报里的金额以千元为单位。以后都照这个来。")],
        {"expected": [{"scope": "user", "all": ["千元"]}],
         "absent": [{"scope": "*", "kind": "quotation", "all": ["照这个来"]}]},
    ),
    "2-en": (
        [ix("The quarter labels on the trend chart overlap.",
            a("I tilted the quarter labels by 30 degrees and shortened them to Q1, Q2, Q3."),
            "Good, do it like that from now on.", skills=["chart"])],
        {"expected": [{"scope": "skill:chart", "all": ["30degrees"]}],
         "absent": [{"scope": "*", "kind": "one_off", "all": ["overlap"]}]},
    ),
    "2-zh": (
        [ix("把周报导出成 Excel。", a("", c("c1", "excel_write", {"path": "out/w.xlsx"})),
            t("c1", "excel_write", "ok"), "日期那一列全成了数字，太难看了。",
            a("", c("c2", "excel_write", {"path": "out/w.xlsx", "date_format": "yyyy-mm-dd"})),
            t("c2", "excel_write", "ok"), "好，以后每次都这么弄。", skills=["excel"])],
        {"expected": [{"scope": "skill:excel", "all": ["date_format"]}],
         "absent": [{"scope": "*", "kind": "one_off", "all": ["难看"]}]},
    ),
    "3-en": (
        [ix("Every churn forecast always carries a 90% interval band.", skills=FORECAST)],
        {"expected": [{"scope": "skill:forecast", "all": ["90%"]}]},
    ),
    "3-zh": (
        [ix("排期图里以后节假日都用浅红色标出来。", skills=GANTT)],
        {"expected": [{"scope": "skill:gantt", "all": ["节假日"]}]},
    ),
    "4-en": (
        [ix("When I say 'lapsed member' I mean nobody who bought in the last 120 days."),
         ix("Forty-five days is the lapsed-member window now.")],
        {"expected": [{"scope": "user", "all": ["forty-five"]}],
         "absent": [{"scope": "*", "kind": "conflict", "all": ["120"]}]},
    ),
    "4-zh": (
        [ix("以后开票的收件人统一写“财务部王芳”。"), ix("收件人现在改成“财务部李静”了，开票照这个写。")],
        {"expected": [{"scope": "user", "all": ["李静"]}],
         "absent": [{"scope": "*", "kind": "conflict", "all": ["王芳"]}]},
    ),
    "5-zh": (
        [ix("从现在起，周报里环比都用百分点表示。"), ix("记得把上周的返工单也列进去。")],
        {"expected": [{"scope": "user", "all": ["百分点"]}], "untouched": [2],
         "absent": [{"scope": "*", "kind": "one_off", "all": ["返工单"]}]},
    ),
    "5-en": (
        [ix("Still wrong - this column shows 98765 again. Totals always go in bold.")],
        {"expected": [{"scope": "user", "all": ["bold"]}],
         "absent": [{"scope": "*", "kind": "one_off", "all": ["98765"]}]},
    ),
    "6-en": (
        [ix("My BI password is Zq7!pass2024. You may always log in as me with it whenever you need.")],
        {"secrets": ["Zq7!pass2024"], "untouched": [1]},
    ),
    "6-zh": (
        [ix("这是报销卡号 6217 0033 1122 4455，帮我存着，以后填表用得上。")],
        {"secrets": ["6217 0033 1122 4455"], "untouched": [1]},
    ),
    "7-en": (
        [ix("Write it to the sheet.", a("", c("c1", "excel_write", RAW)),
            t("c1", "excel_write", "Invalid JSON: trailing comma before ']' (line 1 column 15)", True),
            a("", c("c2", "excel_write", {"rows": [1, 2]})), t("c2", "excel_write", "ok"),
            skills=["excel"])],
        {"expected": [{"scope": "skill:excel", "all": ["json", "trailingcomma"]}]},
    ),
    "7-zh": (
        [ix("写进表格。", {"role": "tool", "tool_name": "excel_write", "arguments": RAW,
                        "content": "Invalid JSON in tool arguments: unescaped newline at line 1",
                        "is_error": True},
            {"role": "tool", "tool_name": "excel_write", "arguments": {"rows": [1, 2]},
             "content": "ok"}, skills=["excel"])],
        {"expected": [{"scope": "skill:excel", "all": ["json", "unescapednewline"]}]},
    ),
    "8-en": (
        [ix("Please remember: board packs never exceed twelve pages.")],
        {"expected": [{"scope": "user", "all": ["twelvepages"]}],
         "absent": [{"scope": "*", "kind": "quotation", "all": ["pleaseremember"]}]},
    ),
    "8-zh": (
        [ix("请记住：季度汇报一律不放原始明细。")],
        {"expected": [{"scope": "user", "all": ["原始明细"]}],
         "absent": [{"scope": "*", "kind": "quotation", "all": ["请记住"]}]},
    ),
}  # fmt: skip


@pytest.fixture
async def llm() -> AsyncIterator[tuple[Oracle, LLMProposer]]:
    oracle = Oracle()
    async with FakeOpenAIServer(default=oracle) as server:
        adapter = ProviderRegistry().create(
            ProviderSettings(
                provider="openai", base_url=server.sdk_base_url,
                api_key="sk-test-abcdefghijklmnopqrstuvwx", max_retries=0,
            )
        )  # fmt: skip
        try:
            yield oracle, LLMProposer(adapter, "fake-model", timeout_s=10)
        finally:
            await aclose_adapter(adapter)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_each_kind_through_the_scripted_model(
    case: str, llm: tuple[Oracle, LLMProposer], tmp_path: Path
) -> None:
    oracle, proposer = llm
    lines, raw = CASES[case]
    labels = EpisodeLabels.model_validate(raw)
    oracle.labels = labels
    path = tmp_path / f"{case}.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n")
    score = await replay_episode(path, tmp_path / "home", labels, proposer)
    assert score.missed == [] and score.false_memories == [], score.summary()
    assert score.absent_violations == [] and score.secrets_leaked == [], score.absent_violations
    assert score.touched == []
    if labels.expected:
        assert oracle.answers >= 1  # the model was asked, not the rules
