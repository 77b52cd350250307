"""The consolidation input: machine-readable, scrubbed, without the injected memory block."""

from __future__ import annotations

import json

from agent_core.memory import Interaction, detect_signals, parse_document
from services.memory_extraction.prompt import INPUT_MARKER, build_input


def test_input_lists_entries_with_ids_and_scrubs_user_words() -> None:
    ix = Interaction.model_validate(
        {
            "turns": [
                {"role": "user", "content": "# 个性化记忆\n- 旧的记忆\n"},
                {"role": "user", "content": "以后金额用万元，我的手机号是 13812345678。"},
                {"role": "assistant", "content": "assistant words are not evidence"},
            ],
            "skills": ["report"],
        }
    )
    docs = {
        "user": parse_document("- 日期用 ISO <!-- id:u1 slot:date_format=iso -->\n", scope="user")
    }
    text = build_input(docs, [(ix, detect_signals(ix))])
    payload = json.loads(text.split(INPUT_MARKER, 1)[1])
    assert payload["scopes"] == ["skill:report", "user"]
    assert payload["memory"]["user"] == [
        {"id": "u1", "text": "日期用 ISO", "slot": "date_format=iso"}
    ]
    assert "13812345678" not in text and "旧的记忆" not in text
    assert "assistant words" not in text
    assert any("万元" in c["text"] for c in payload["interactions"][0]["candidates"])
