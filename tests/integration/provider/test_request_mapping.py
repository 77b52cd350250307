"""What each provider's server receives: messages, system, tools, tool_choice, options."""

from __future__ import annotations

import base64
from typing import Any

from agent_core.types.protocol import (
    AttachmentBlock,
    JsonBlock,
    MediaPart,
    ModelMessage,
    ModelRequest,
    NamedToolChoice,
    SystemBlock,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
)
from tests.fakes import script as s
from tests.integration.provider.harness import API_KEY, collect, running

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def conversation(**kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model="fake-model",
        system=[SystemBlock(text="Be brief."), SystemBlock(text="Use tools.", cache=True)],
        messages=[
            ModelMessage(role="user", content=[TextBlock(text="Weather in Paris?")]),
            ModelMessage(
                role="assistant",
                content=[
                    TextBlock(text="Looking."),
                    ToolCallBlock(id="call_1", name="get_weather", arguments={"city": "Paris"}),
                ],
            ),
            ModelMessage(
                role="tool",
                content=[
                    ToolResultBlock(
                        tool_call_id="call_1",
                        content=[JsonBlock(data={"temp": 21})],
                        is_error=True,
                    )
                ],
            ),
            ModelMessage(role="user", content=[TextBlock(text="And now?")]),
        ],
        tools=[ToolDefinition(name="get_weather", description="Weather", input_schema=SCHEMA)],
        tool_choice=NamedToolChoice(name="get_weather"),
        temperature=0.2,
        stop=["END"],
        **kwargs,
    )


async def test_openai_request_mapping() -> None:
    async with running("openai", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, conversation(provider_options={"seed": 7}))
    req = server.requests[0]
    body = req.json
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief.\n\nUse tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": 'ERROR: {"temp":21}'},
        {"role": "user", "content": "And now?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather", "parameters": SCHEMA},
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert (body["temperature"], body["stop"], body["seed"]) == (0.2, ["END"], 7)


async def test_openai_tool_calls_alone_carry_an_empty_string_as_content() -> None:
    """``null`` content is OpenAI's own form, but llama.cpp's server (a string schema) answers it
    with 500, for this request and every later one of the session: every server takes ``""``."""
    calls_only = ModelRequest(
        model="fake-model",
        messages=[
            ModelMessage(role="user", content=[TextBlock(text="Weather in Paris?")]),
            ModelMessage(
                role="assistant",
                content=[ToolCallBlock(id="call_1", name="get_weather", arguments={"city": "P"})],
            ),
            ModelMessage(
                role="tool",
                content=[ToolResultBlock(tool_call_id="call_1", content=[TextBlock(text="21")])],
            ),
        ],
    )
    async with running("openai", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, calls_only)
    messages = server.requests[0].json["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"
    assert all(isinstance(m["content"], str) for m in messages)


async def test_anthropic_request_mapping() -> None:
    async with running("anthropic", [s.text_turn("ok")], default_max_tokens=321) as (
        server,
        adapter,
    ):
        await collect(adapter, conversation())
    req = server.requests[0]
    body = req.json
    assert req.path == "/v1/messages"
    # This SDK version sends the API key as a bearer token.
    assert (
        req.headers["authorization"] == f"Bearer {API_KEY}" and "anthropic-version" in req.headers
    )
    assert body["max_tokens"] == 321 and body["stream"] is True
    assert body["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            # The tool result and the next user text merge into one user turn, result first.
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [{"type": "text", "text": '{"temp":21}'}],
                    "is_error": True,
                },
                {"type": "text", "text": "And now?"},
            ],
        },
    ]
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather", "input_schema": SCHEMA}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert (body["temperature"], body["stop_sequences"]) == (0.2, ["END"])


async def test_anthropic_tool_choice_required_is_any() -> None:
    async with running("anthropic", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, conversation().model_copy(update={"tool_choice": "required"}))
    assert server.requests[0].json["tool_choice"] == {"type": "any"}


async def test_ollama_request_mapping() -> None:
    async with running("ollama", [s.text_turn("ok")], supports_tools=True) as (server, adapter):
        await collect(adapter, conversation(max_tokens=64))
    assert [r.path for r in server.requests] == ["/api/chat"], "capability known: no /api/show"
    body = server.requests[0].json
    assert body["messages"] == [
        {"role": "system", "content": "Be brief.\n\nUse tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": 'ERROR: {"temp":21}', "tool_name": "get_weather"},
        {"role": "user", "content": "And now?"},
    ]
    assert body["tools"][0]["function"]["parameters"] == SCHEMA
    assert body["options"] == {"num_predict": 64, "temperature": 0.2, "stop": ["END"]}
    assert body["stream"] is True


# ---------------------------------------------------------------- attachments as content

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-fake-image-bytes").decode()
PDF = base64.b64encode(b"%PDF-1.7 fake").decode()


def with_attachments(*, pdf: bool = True) -> ModelRequest:
    """A user message with an image and (optionally) a PDF attachment, their media resolved."""
    blocks: list[Any] = [
        TextBlock(text="What is in these?"),
        AttachmentBlock(path="input/chart.png", filename="chart.png", mime_type="image/png"),
    ]
    media = {"input/chart.png": MediaPart(kind="image", mime_type="image/png", data=PNG)}
    if pdf:
        blocks.append(AttachmentBlock(path="input/report.pdf", mime_type="application/pdf"))
        media["input/report.pdf"] = MediaPart(
            kind="pdf", mime_type="application/pdf", data=PDF, filename="report.pdf"
        )
    return ModelRequest(
        model="fake-model", messages=[ModelMessage(role="user", content=blocks)], media=media
    )


async def test_openai_takes_an_image_attachment_as_an_image_url_part() -> None:
    async with running("openai", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, with_attachments())
    [message] = server.requests[0].json["messages"]
    assert message == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "What is in these?\n\n[attachment: chart.png at input/chart.png]",
            },
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {"type": "text", "text": "[attachment: input/report.pdf at input/report.pdf]"},
            {
                "type": "file",
                "file": {
                    "filename": "report.pdf",
                    "file_data": f"data:application/pdf;base64,{PDF}",
                },
            },
        ],
    }


async def test_anthropic_takes_an_image_attachment_as_an_image_block() -> None:
    async with running("anthropic", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, with_attachments())
    [message] = server.requests[0].json["messages"]
    assert message["role"] == "user"
    assert message["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }
    assert message["content"][3] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "report.pdf",
    }
    assert message["content"][0]["text"].endswith("[attachment: chart.png at input/chart.png]")


async def test_ollama_takes_an_image_attachment_in_the_messages_images() -> None:
    async with running("ollama", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, with_attachments(pdf=False))
    [message] = server.requests[0].json["messages"]
    assert message == {
        "role": "user",
        "content": "What is in these?\n\n[attachment: chart.png at input/chart.png]",
        "images": [PNG],
    }


async def test_a_text_document_is_text_and_an_unresolved_attachment_a_note() -> None:
    request = ModelRequest(
        model="fake-model",
        messages=[
            ModelMessage(
                role="user",
                content=[
                    AttachmentBlock(path="input/notes.txt", mime_type="text/plain"),
                    AttachmentBlock(path="input/big.png", mime_type="image/png"),
                ],
            )
        ],
        media={"input/notes.txt": MediaPart(kind="text", mime_type="text/plain", data="hello")},
    )
    async with running("openai", [s.text_turn("ok")]) as (server, adapter):
        await collect(adapter, request)
    [message] = server.requests[0].json["messages"]
    assert message["content"] == (
        "[attachment: input/notes.txt at input/notes.txt]\nhello\n\n"
        "[attachment: input/big.png at input/big.png]"
    )
