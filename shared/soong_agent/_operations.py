"""Every operation of the HTTP API the SDK calls, declared once: method, path template, retry safety.

:data:`OPERATIONS` is what a test compares with the gateway's OpenAPI document, so an operation
the API gained and the SDK lacks fails the build. ``idempotent`` says whether a request may be sent
again after it may have reached the server (a dropped connection, a 503): reads, replacing
uploads, conditional writes, cancels and switches are; creating a session or posting a message
is not (a repeat would create a second one) — except that the SDK posts every message with an
``Idempotency-Key``, which makes that request repeatable (``_http.repeatable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["OPERATIONS", "Operation"]


@dataclass(frozen=True, slots=True)
class Operation:
    """One API operation."""

    method: str
    path: str
    idempotent: bool

    def url(self, **params: str) -> str:
        """The path with its parameters filled in, each quoted as one path segment (a ``path``
        parameter — a file's path in a workspace — keeps its slashes)."""
        return self.path.format(
            **{k: quote(v, safe="/" if k == "path" else "") for k, v in params.items()}
        )


OPERATIONS: dict[tuple[str, str], Operation] = {}


def _op(method: str, path: str, *, idempotent: bool | None = None) -> Operation:
    safe = method in {"GET", "PUT", "DELETE"} if idempotent is None else idempotent
    op = Operation(method, path, safe)
    OPERATIONS[(method, path)] = op
    return op


_S = "/v1/sessions/{session_id}"

HEALTHZ = _op("GET", "/healthz")
READYZ = _op("GET", "/readyz")

CREATE_SESSION = _op("POST", "/v1/sessions")
LIST_SESSIONS = _op("GET", "/v1/sessions")
USAGE = _op("GET", "/v1/usage")
GET_SESSION = _op("GET", _S)
PATCH_SESSION = _op("PATCH", _S, idempotent=True)  # sets fields to given values
DELETE_SESSION = _op("DELETE", _S, idempotent=False)  # a repeat after it worked would 404
EXPORT_SESSION = _op("GET", _S + "/export")
LIST_AUDIT = _op("GET", "/v1/audit")

POST_MESSAGE = _op("POST", _S + "/messages")
COMPACT = _op("POST", _S + "/compact")

LIST_RUNS = _op("GET", _S + "/runs")
GET_RUN = _op("GET", _S + "/runs/{run_id}")
CANCEL_RUN = _op("POST", _S + "/runs/{run_id}/cancel", idempotent=True)
RUN_EVENTS = _op("GET", _S + "/runs/{run_id}/events")
RUN_FILES = _op("GET", _S + "/runs/{run_id}/files")

TREE = _op("GET", _S + "/tree")
PATH = _op("GET", _S + "/path")
GET_NODE = _op("GET", _S + "/nodes/{node_id}")
NODE_CONTEXT = _op("GET", _S + "/nodes/{node_id}/context")
REGENERATE = _op("POST", _S + "/nodes/{node_id}/regenerate")  # a new run each time
MODEL_CONTEXT = _op("GET", _S + "/nodes/{node_id}/model_context")
SWITCH_NODE = _op("POST", _S + "/switch_node", idempotent=True)
LIST_EVENTS = _op("GET", _S + "/events")
LIST_AGENTS = _op("GET", _S + "/agents")
LIST_SKILLS = _op("GET", _S + "/skills")
LIST_HOOKS = _op("GET", _S + "/hooks")

LIST_PERMISSIONS = _op("GET", _S + "/permissions")
DECIDE_PERMISSION = _op("POST", _S + "/permissions/{request_id}", idempotent=True)  # once: 409

LIST_ARTIFACTS = _op("GET", _S + "/artifacts")
GET_ARTIFACT = _op("GET", _S + "/artifacts/{artifact_id}")
ARTIFACT_CONTENT = _op("GET", _S + "/artifacts/{artifact_id}/content")
LIST_FILES = _op("GET", _S + "/files")
DOWNLOAD_FILE = _op("GET", _S + "/files/{area}/{path}")
UPLOAD_FILE = _op("PUT", _S + "/files/input/{filename}")
UPLOAD_FILES = _op("POST", _S + "/files")

LIST_TASK_LISTS = _op("GET", _S + "/tasks")
GET_TASK_LIST = _op("GET", _S + "/tasks/{list_name}")

READ_USER_MEMORY = _op("GET", "/v1/memory/user")
WRITE_USER_MEMORY = _op("PUT", "/v1/memory/user")  # conditional on If-Match
READ_SKILL_MEMORY = _op("GET", "/v1/memory/skills/{skill}")
WRITE_SKILL_MEMORY = _op("PUT", "/v1/memory/skills/{skill}")
LIST_MEMORY = _op("GET", "/v1/memory")
USER_MEMORY_HISTORY = _op("GET", "/v1/memory/user/history")
SKILL_MEMORY_HISTORY = _op("GET", "/v1/memory/skills/{skill}/history")
RESTORE_USER_MEMORY = _op("POST", "/v1/memory/user/restore")  # conditional on If-Match
RESTORE_SKILL_MEMORY = _op("POST", "/v1/memory/skills/{skill}/restore")

_A = "/v1/assistants/{name_or_id}"
CREATE_ASSISTANT = _op("POST", "/v1/assistants")  # a repeat would answer 409 (name taken)
LIST_ASSISTANTS = _op("GET", "/v1/assistants")
GET_ASSISTANT = _op("GET", _A)
LIST_ASSISTANT_VERSIONS = _op("GET", _A + "/versions")
PATCH_ASSISTANT = _op("PATCH", _A)  # each update is a new version: not repeated blindly
PUT_ASSISTANT = _op("PUT", _A, idempotent=False)
ARCHIVE_ASSISTANT = _op("DELETE", _A)
