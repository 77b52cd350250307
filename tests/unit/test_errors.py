"""Errors: the exception family, traceback-free payloads, and redaction of secrets."""

from __future__ import annotations

import json
import re
import traceback

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_core import errors, redaction
from agent_core.errors import (
    AgentCoreError,
    BusTimeoutError,
    ConfigError,
    ErrorPayload,
    PermissionDeniedError,
    ProviderError,
    ProviderErrorPayload,
    SchemaError,
    StorageError,
    ToolError,
    redact,
    redact_obj,
)

OPENAI_KEY = "sk-proj-AbCdEf0123456789GhIjKlMn"
OPENAI_LEGACY = "sk-0123456789abcdefABCDEF0123456789"
ANTHROPIC_KEY = "sk-ant-api03-AbCdEf0123456789_GhIj-KlMnOp"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"

LEAKS = [
    (f"openai said: invalid key {OPENAI_KEY}", OPENAI_KEY),
    (f"key={OPENAI_LEGACY}", OPENAI_LEGACY),
    (f"x-api-key: {ANTHROPIC_KEY} rejected", ANTHROPIC_KEY),
    (f"Authorization: Bearer {BEARER}", BEARER),
    (f"authorization: bearer {BEARER}", BEARER),
    ("connect failed password=hunter2hunter2 host=db", "hunter2hunter2"),
    ('{"password": "correct horse battery"}', "correct"),
    ("PASSWORD: s3cr3t!", "s3cr3t!"),
    ("api_key=abc123def456", "abc123def456"),
    ("fetch https://alice:pa55word@example.com/x failed", "pa55word"),
    ("postgres://admin:topsecret@10.0.0.1:5432/db", "topsecret"),
    ("see https://alice:pa55word@example.com/x", "alice"),
]


@pytest.mark.parametrize(("text", "secret"), LEAKS, ids=range(len(LEAKS)))
def test_redact_removes_secrets_from_text(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert errors.REDACTED in out


def test_redact_keeps_ordinary_text() -> None:
    text = "node_0123 failed after 3 turns at https://example.com/api (HTTP 500); 中文也在"
    assert redact(text) == text


def test_redact_removes_password_only_url_credentials() -> None:
    assert "hunter2" not in redact("cannot reach redis://:hunter2@127.0.0.1:6379/0")


def test_redact_keeps_token_counts() -> None:
    assert redact("max_tokens=4096") == "max_tokens=4096"
    assert redact_obj({"usage": {"input_tokens": 5}}) == {"usage": {"input_tokens": 5}}


_key_chars = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=20, max_size=60
)
_filler = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30).map(lambda s: s + " ")


@settings(max_examples=300)
@given(
    before=_filler,
    prefix=st.sampled_from(["sk-", "sk-ant-", "sk-proj-"]),
    body=_key_chars,
    after=_filler,
)
def test_any_embedded_api_key_is_removed(before: str, prefix: str, body: str, after: str) -> None:
    secret = prefix + body
    assert secret not in redact(f"{before}{secret} {after}")


@settings(max_examples=500)
@given(text=st.text(max_size=200))
def test_redact_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def _every_pattern(text: str) -> str:
    for pattern, replacement in redaction._PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# Text made of the pieces the patterns look for, so that matches are frequent, near misses too.
_PIECES = st.sampled_from(
    [
        "sk-", "sk-ant-", "sa_live_", "ghp_", "xoxb-", "AKIA", "AIza", "Bearer ", "basic ",
        "://", "@", ":", "=", '"', " ", "\n", "api_key", "ApiKey", "PASSWORD", "passwd", "pwd",
        "secret", "Token", "tokens", "token_count", "auth", "access-key", "private_key",
        "https://u:p@h", "0123456789abcdefABCDEF", "_-.", "ſ", "K", "é",
        "gh", "gho_", "GHS_", "author", "x" * 39, "y" * 40,  # near misses, a key's length bounds
    ]
)  # fmt: skip


@settings(max_examples=1000)
@given(text=st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=25).map("".join))
def test_the_prefilter_never_changes_what_is_redacted(text: str) -> None:
    assert redact(text) == _every_pattern(text)


# The key=value pattern as plainly written, without the lookahead that lets other words fail fast.
_PLAIN_PAIR = re.compile(
    r"(?i)(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]{0,40}?(?:api[_\-]?key|apikey|passw(?:or)?d|pwd|"
    r"secret|token(?!s|_count)|access[_\-]?key|private[_\-]?key|auth)[A-Za-z0-9_\-]{0,40})"
    r"(\"?\s{0,8}[:=]\s{0,8}\"?)([^\s\"',;&]+)"
)


@settings(max_examples=1000)
@given(text=st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=25).map("".join))
def test_the_key_value_lookahead_never_changes_a_match(text: str) -> None:
    pattern, replacement = redaction._PATTERNS[-1]
    assert pattern.sub(replacement, text) == _PLAIN_PAIR.sub(replacement, text)


@pytest.mark.parametrize(
    ("key", "redacted"),
    [
        ("x" * 40 + "private_key" + "y" * 40, True),  # the longest key a secret's name allows
        ("x" * 41 + "private_key" + "y" * 40, False),
        ("x" * 40 + "private_key" + "y" * 41, False),
        ("x" * 40 + "passwd" + "y" * 40, True),
        ("tokens", False),
    ],
)
def test_a_key_is_redacted_within_its_length_bounds(key: str, redacted: bool) -> None:
    text = f"see {key} = hunter2hunter2; {key}: hunter2hunter2"
    assert ("hunter2" not in redact(text)) is redacted
    assert redact(text) == _PLAIN_PAIR.sub(redaction._PATTERNS[-1][1], text)


def test_redact_obj_walks_nested_details() -> None:
    details = {
        "request": {
            "headers": {"Authorization": f"Bearer {BEARER}", "Accept": "json"},
            "url": "https://bob:pw1234@api.example.com/v1",
            "body": [f"use {OPENAI_KEY}", 3, None, True, ("password=abcdef123",)],
        },
        "api_key": "anything at all",
        "attempts": 2,
    }
    out = redact_obj(details)
    dumped = json.dumps(out)
    for secret in (BEARER, "pw1234", OPENAI_KEY, "abcdef123", "anything at all"):
        assert secret not in dumped
    assert out["request"]["headers"]["Accept"] == "json"
    assert out["attempts"] == 2
    assert out["request"]["body"][1:4] == [3, None, True]
    assert details["api_key"] == "anything at all"  # the input is not mutated


def test_error_fields_and_cause() -> None:
    cause = OSError("disk full")
    exc = StorageError(
        "write_failed", "could not write", retryable=True, details={"a": 1}, cause=cause
    )
    assert (exc.code, exc.message, exc.retryable, exc.details) == (
        "write_failed",
        "could not write",
        True,
        {"a": 1},
    )
    assert exc.cause is cause and exc.__cause__ is cause
    assert str(exc) == "could not write"


@pytest.mark.parametrize(
    ("cls", "error_type"),
    [
        (ConfigError, "config_error"),
        (ProviderError, "provider_error"),
        (ToolError, "tool_error"),
        (StorageError, "storage_error"),
        (SchemaError, "schema_error"),
        (PermissionDeniedError, "permission_denied"),
        (BusTimeoutError, "bus_timeout"),
    ],
)
def test_hierarchy_and_payload_type(cls: type[AgentCoreError], error_type: str) -> None:
    assert issubclass(cls, AgentCoreError)
    assert not issubclass(cls, PermissionError)
    assert cls("c", "m").to_payload().type == error_type


def test_bus_timeout_is_retryable_by_default() -> None:
    assert BusTimeoutError("timeout", "no reply").retryable is True
    assert BusTimeoutError("timeout", "no reply", retryable=False).retryable is False


def test_payload_is_redacted_and_has_no_traceback() -> None:
    try:
        try:
            raise ValueError(f"inner with {OPENAI_KEY}")
        except ValueError as inner:
            raise ToolError(
                "tool_failed",
                f"tool failed using {ANTHROPIC_KEY}",
                details={"env": {"password": "hunter2hunter2"}, "trace": [f"Bearer {BEARER}"]},
                cause=inner,
            ) from inner
    except ToolError as exc:
        payload = exc.to_payload()
        tb_text = "".join(traceback.format_exception(exc))
    assert "Traceback" in tb_text  # the exception had one; the payload must not
    assert set(ErrorPayload.model_fields) == {
        "type",
        "code",
        "message",
        "retryable",
        "details",
        "redacted",
    }
    dumped = payload.model_dump_json()
    for leak in (ANTHROPIC_KEY, OPENAI_KEY, "hunter2hunter2", BEARER, "Traceback", "inner with"):
        assert leak not in dumped
    assert payload.redacted is True
    assert payload.code == "tool_failed"


def test_provider_payload_carries_provider_and_status() -> None:
    exc = ProviderError(
        "rate_limited",
        f"429 for key {OPENAI_KEY}",
        retryable=True,
        provider="openai",
        status_code=429,
        retry_after_s=2.0,
    )
    payload = exc.to_payload()
    assert isinstance(payload, ProviderErrorPayload)
    assert (payload.type, payload.provider, payload.status_code, payload.retryable) == (
        "provider_error",
        "openai",
        429,
        True,
    )
    assert OPENAI_KEY not in payload.model_dump_json()
    assert ProviderErrorPayload.model_validate_json(payload.model_dump_json()) == payload


@pytest.mark.parametrize(
    "extra",
    [{"traceback": "Traceback (most recent call last)"}, {"redacted": False}, {"stack": []}],
)
def test_payload_refuses_tracebacks_and_unredacted_flag(extra: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ErrorPayload.model_validate({"type": "t", "code": "c", "message": "m", **extra})


def test_directly_built_payload_is_redacted() -> None:
    payload = ErrorPayload(type="t", code="c", message=f"key {OPENAI_KEY}")
    assert OPENAI_KEY not in payload.message
