"""Property run over the OpenAPI schema: generated params and bodies never get a 5xx, and every
JSON answer matches the schema declared for its status (hypothesis-jsonschema)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from agent_core.config import BusSettings, ModelSettings, Settings
from agent_core.service import ServiceContext
from services.gateway.app import create_app
from tests.e2e.gateway.conftest import Gw, new_session, run_message
from tests.e2e.gateway.test_api import _seed_artifact

pytestmark = pytest.mark.e2e


def _offline_schema() -> dict[str, Any]:
    # The served providers as the `gw` stack's (its model is `fake`): the document names them as
    # the allowed values of an agent config's `provider`, in answers too, and other test files
    # sharing the stack store assistants with the stack's provider.
    settings = Settings(
        home=Path("/nonexistent"),
        bus=BusSettings(redis_url="redis://127.0.0.1:1"),
        model=ModelSettings(provider="fake"),
    )
    return create_app(ServiceContext(settings, "gateway", "schema")).openapi()


SCHEMA = _offline_schema()
OPERATIONS = [
    (method.upper(), path)
    for path, ops in SCHEMA["paths"].items()
    if path.startswith("/v1/")
    for method in ops
]


def _inline(node: Any, components: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """The schema with local $refs replaced (a recursive one, such as JsonValue, as "any value"
    past its first level; keywords beside a $ref kept through ``allOf``) and OpenAPI-only
    keywords dropped."""
    if isinstance(node, list):
        return [_inline(n, components, seen) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return {}
        inlined = _inline(copy.deepcopy(components[name]), components, (*seen, name))
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return inlined
        return {"allOf": [inlined, _inline(siblings, components, seen)]}
    drop = {"discriminator", "examples", "example", "format", "title", "description"}
    return {k: _inline(v, components, seen) for k, v in node.items() if k not in drop}


@pytest.fixture(scope="module")
def ids(gw: Gw) -> dict[str, list[str]]:
    """Real ids of account A to mix into generated paths."""
    with gw.client() as c:
        sid = new_session(c)
        run_id, events = run_message(c, sid, "property")
        node_id = next(
            e.data["node"]["node_id"] for e in events if e.event == "node_created" and e.data
        )
        (gw.stack.home / "accounts" / "dev" / "sessions" / sid / "output" / "p.md").write_text("p")
        artifact_id = _seed_artifact(gw, sid, "output/p.md")
    return {
        "session_id": [sid],
        "run_id": [run_id],
        "node_id": [node_id],
        "artifact_id": [artifact_id],
        "request_id": ["req_0"],
        "filename": ["up.txt"],
        "area": ["input", "output"],
        "path": ["p.md", "a/b"],
    }


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# What the system cannot hold, mixed into every body: unpaired surrogates (in values and keys),
# integers past 64 bits and nesting past the gateway's depth limit; each must be a 422, never 5xx.
_SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
_NASTY = (
    _SURROGATES
    | st.builds(lambda s: {s: 1}, _SURROGATES)
    | st.integers(min_value=2**63, max_value=10**400)
    | st.integers(max_value=-(2**63) - 1, min_value=-(10**30))
    | st.integers(min_value=20, max_value=400).map(_nested)
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | _NASTY,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _strategy(schema: dict[str, Any], *, nasty: bool = True) -> st.SearchStrategy[Any]:
    """Values of a JSON schema. Scalars come from hypothesis-jsonschema; objects and arrays are
    built here (its object strategy does not run on this Hypothesis version)."""
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return st.one_of([_strategy(s, nasty=nasty) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_strategy({**schema, "type": k}, nasty=nasty) for k in kind])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if not props:
            return st.dictionaries(st.text(max_size=8), _JSON, max_size=3)
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: _strategy(v, nasty=nasty) for k, v in props.items() if k in required},
            optional={k: _strategy(v, nasty=nasty) for k, v in props.items() if k not in required},
        )
    if kind == "array":
        low = schema.get("minItems", 0)
        items = _strategy(schema.get("items", {}), nasty=nasty)
        return st.lists(items, min_size=low, max_size=max(low, 3))
    if kind in ("string", "integer", "number", "boolean", "null"):
        # Mostly what the schema asks for; in bodies now and then what the system cannot hold
        # (a URL cannot even carry an unpaired surrogate).
        if not nasty:
            return from_schema(schema)
        return st.one_of(from_schema(schema), from_schema(schema), from_schema(schema), _NASTY)
    return _JSON


def _params_strategy(op: dict[str, Any], ids: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    components = SCHEMA["components"]["schemas"]
    path_params: dict[str, st.SearchStrategy[Any]] = {}
    query: dict[str, st.SearchStrategy[Any]] = {}
    for p in op.get("parameters", []):
        schema = _inline(p.get("schema", {}), components)
        generated = _strategy(schema, nasty=False) if schema else st.text(max_size=20)
        if p["in"] == "path":
            known = ids.get(p["name"], [])
            path_params[p["name"]] = st.sampled_from(known) if known else generated
            if known:
                path_params[p["name"]] = st.one_of(
                    st.sampled_from(known), st.sampled_from(known), generated
                )
        elif p["in"] == "query":
            query[p["name"]] = st.one_of(st.none(), generated)
    body: st.SearchStrategy[Any] = st.none()
    content = op.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        schema = _inline(content["application/json"]["schema"], components)
        body = st.one_of(_strategy(schema), _JSON, _strategy(schema))
    elif "application/octet-stream" in content:
        body = st.binary(max_size=2048)
    return st.fixed_dictionaries(
        {
            "path": st.fixed_dictionaries(path_params),
            "query": st.fixed_dictionaries(query),
            "body": body,
        }
    )


def _expected_schema(op: dict[str, Any], status: int) -> dict[str, Any] | None:
    responses = op["responses"]
    entry = responses.get(str(status)) or responses.get("default")
    assert entry is not None, f"status {status} is not declared"
    schema = entry.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return None
    return {**schema, "components": SCHEMA["components"]}


def _segments(quoted: str) -> str:
    """Dot segments escaped: a client removes literal ones (RFC 3986), sending another URL."""
    return "/".join(p.replace(".", "%2E") if p in (".", "..") else p for p in quoted.split("/"))


def _check(
    client: httpx.Client, method: str, path: str, op: dict[str, Any], case: dict[str, Any]
) -> None:
    url = path
    for name, value in case["path"].items():
        url = url.replace("{" + name + "}", _segments(quote(str(value), safe="")) or "x")
        url = url.replace("{" + name + ":path}", _segments(quote(str(value), safe="/")) or "x")
    query = {k: v for k, v in case["query"].items() if v is not None}
    if "timeout_s" in query and isinstance(query["timeout_s"], int | float):
        query["timeout_s"] = min(float(query["timeout_s"]), 0.5)  # keep cancel?wait bounded
    kwargs: dict[str, Any] = {
        "params": {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in query.items()}
    }
    body = case["body"]
    if isinstance(body, bytes):
        kwargs["content"] = body
    elif body is not None or "requestBody" in op:
        # Encoded here, ASCII-escaped: httpx's own JSON encoding cannot carry an unpaired
        # surrogate, which must reach the gateway as the escape a client would send.
        kwargs["content"] = json.dumps(body).encode()
        kwargs["headers"] = {"content-type": "application/json"}
    with client.stream(method, url, **kwargs) as response:
        status = response.status_code
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            assert status == 200
            return  # a live stream: its frames are covered by the SSE tests
        raw = response.read()
    assert status < 500, (method, url, kwargs, raw[:500])
    schema = _expected_schema(op, status)
    if kind.startswith("application/json") and schema is not None:
        jsonschema.validate(json.loads(raw), schema, cls=jsonschema.Draft202012Validator)
    if status >= 400:
        body_json = json.loads(raw)
        assert set(body_json) == {"error"} and set(body_json["error"]) == {
            "code",
            "message",
            "details",
        }


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_operation_never_5xx_and_matches_schema(
    gw: Gw, ids: dict[str, list[str]], method: str, path: str
) -> None:
    op = SCHEMA["paths"][path][method.lower()]
    with gw.client() as client:

        @settings(
            max_examples=25,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )
        @given(case=_params_strategy(op, ids))
        def run(case: dict[str, Any]) -> None:
            _check(client, method, path, op, case)

        run()


def test_live_schema_is_the_tested_schema(gw: Gw) -> None:
    live = httpx.get(f"{gw.stack.gateway_url}/openapi.json").json()
    assert live["paths"].keys() == SCHEMA["paths"].keys()
    assert live["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
