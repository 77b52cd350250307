"""Executes one tool call: validate, ask permission, run with a timeout, cap, report artifacts.

Every failure becomes a ``ToolResult`` with ``is_error=True`` and a message the model can act on,
so one bad call never ends the run; only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from agent_core.errors import AgentCoreError, redact
from agent_core.hooks.pipeline import Validator, Verdict
from agent_core.tools.artifacts import ArtifactSink, OutputFile, SavedToolOutput, guess_mime
from agent_core.tools.base import Tool, ToolContext, ToolOutput
from agent_core.tools.paths import Area, InvalidPathError, PathEscapeError, SessionPath
from agent_core.tools.permissions import PermissionGate
from agent_core.tools.registry import ToolRegistry
from agent_core.tools.workspace import Workspace
from agent_core.types.enums import HookDecision, PermissionBehavior
from agent_core.types.protocol import ArtifactRefBlock, TextBlock, ToolCall, ToolResult

__all__ = ["ExecutorSettings", "ToolExecutor", "ToolHooks", "truncate_output"]

# The areas whose changes a writing call reports: output/ (deliverables, registered as
# artifacts) and scratchpad/ (working files, listed with the call that changed them).
_WATCHED = (SessionPath((Area.OUTPUT.value,)), SessionPath((Area.SCRATCHPAD.value,)))
_Snapshot = dict[SessionPath, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    """Limits of the executor: inline output cap (bytes of UTF-8) and the ``output/`` scan size."""

    output_cap_bytes: int = 32 * 1024
    max_output_scan: int = 10_000


def truncate_output(text: str, cap: int) -> tuple[str, int]:
    """Cut ``text`` to at most ``cap`` UTF-8 bytes plus a ``[truncated N bytes]`` marker."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text, 0
    dropped = len(data) - cap
    return data[:cap].decode("utf-8", errors="ignore") + f"\n[truncated {dropped} bytes]", dropped


def _validation_message(tool: Tool[Any], exc: ValidationError) -> str:
    lines = [f"Invalid arguments for tool {tool.name!r}:"]
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        lines.append(f"- {loc}: {err['msg']}")
    schema = json.dumps(tool.definition().input_schema, separators=(",", ":"))
    lines.append(f"Call it again with arguments matching this JSON Schema: {schema}")
    return "\n".join(lines)


class ToolHooks(Protocol):
    """The run's PreToolUse / PostToolUse hooks (``agent_core.hooks.RunHooks``)."""

    @property
    def on_tools(self) -> bool:
        """Whether any hook of a tool call's events applies; ``False``: calls skip the hooks."""
        ...

    async def pre_tool(self, call: ToolCall, validate: Validator) -> Verdict | None:
        """The hooks' verdict on ``call`` before it runs; ``None`` when none matches."""
        ...

    async def post_tool(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """``result`` as the hooks leave it (withheld, or with context added)."""
        ...


def _schema_problem(tool: Tool[Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit ``tool``'s input schema (first problem), or ``None``."""
    try:
        tool.input_model.model_validate(arguments)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False)[0]
        return f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
    return None


class ToolExecutor:
    """Runs tool calls of one run against one workspace (see module docstring)."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        workspace: Workspace,
        run_id: str,
        agent_id: str,
        permissions: PermissionGate,
        artifacts: ArtifactSink,
        settings: ExecutorSettings | None = None,
        enabled: frozenset[str] | None = None,
        hooks: ToolHooks | None = None,
    ) -> None:
        self.registry = registry
        # None when no hook of a tool call's events applies to the run (none at all, or only
        # hooks of other events such as Stop): then a call costs nothing more than this check.
        self.hooks = hooks if hooks is not None and hooks.on_tools else None
        # The agent's enabled tools (None: all registered). Hiding a tool's definition from the
        # model is not enough: a model can name any tool, so a call outside this set is refused.
        self.enabled = enabled
        self.workspace = workspace
        self.run_id = run_id
        self.agent_id = agent_id
        self.permissions = permissions
        self.artifacts = artifacts
        self.settings = settings or ExecutorSettings()

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        """The result of ``call``; never raises except ``CancelledError`` and, with hooks, what
        writing their timeline events raises (the run's store: as the loop's own writes)."""
        started = time.monotonic()
        meta: dict[str, Any] = {"tool": call.name}
        output, call = await self._execute(call, node_id, meta)
        text, dropped = truncate_output(output.text, self.settings.output_cap_bytes)
        content: list[TextBlock | ArtifactRefBlock] = [TextBlock(text=text)]
        if dropped:
            saved = SavedToolOutput(tool_call_id=call.id, tool_name=call.name, text=output.text)
            artifact_id = await self.artifacts.save_tool_output(saved)
            meta["truncated_bytes"] = dropped
            if artifact_id is not None:
                text += f" (full output saved as artifact {artifact_id})"
                content = [
                    TextBlock(text=text),
                    ArtifactRefBlock(artifact_id=artifact_id, summary="full tool output"),
                ]
        meta.update(output.metadata)
        meta["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        result = ToolResult(
            tool_call_id=call.id, content=content, is_error=output.is_error, metadata=meta
        )
        if self.hooks is not None:
            result = await self.hooks.post_tool(call, result)
        return result

    async def _execute(
        self, call: ToolCall, node_id: str | None, meta: dict[str, Any]
    ) -> tuple[ToolOutput, ToolCall]:
        """The call's output, and the call as it ran (a PreToolUse hook may rewrite it)."""
        tool = self.registry.get(call.name)
        # The offered names are listed only for a refusal: sorting the registry on every call
        # was a tenth of a plain call's cost.
        if tool is None or (self.enabled is not None and call.name not in self.enabled):
            offered = [
                n for n in self.registry.names() if self.enabled is None or n in self.enabled
            ]
            known = ", ".join(offered) or "none"
            meta["error_code"] = "unknown_tool" if tool is None else "tool_not_enabled"
            what = "Unknown tool" if tool is None else "Tool not enabled for this agent:"
            return ToolOutput(f"{what} {call.name!r}. Available tools: {known}.", True), call
        try:
            args = tool.input_model.model_validate(call.arguments)
        except ValidationError as exc:
            meta["error_code"] = "invalid_arguments"
            return ToolOutput(_validation_message(tool, exc), True), call
        ask: str | None = None
        if self.hooks is not None:
            verdict = await self.hooks.pre_tool(call, lambda a: _schema_problem(tool, a))
            if verdict is not None:
                if verdict.blocked:
                    meta["error_code"] = "hook_denied"
                    text = f"Hook {verdict.hook} refused this call of {call.name}: {verdict.reason}"
                    return ToolOutput(text, True), call
                if verdict.arguments is not None:  # checked against the schema by the hooks
                    call = call.model_copy(update={"arguments": verdict.arguments})
                    args = tool.input_model.model_validate(verdict.arguments)
                    meta["hook_rewrote_arguments"] = True
                if verdict.decision is HookDecision.ASK:
                    ask = f"hook {verdict.hook} asks: {verdict.reason}"
        decision = await self.permissions.decide(
            call,
            writes=tool.writes,
            asks_first=tool.asks_first,
            session_id=self.workspace.session_id,
            run_id=self.run_id,
            agent_id=self.agent_id,
            ask=ask,
            input_schema=tool.input_model.model_json_schema,
        )
        meta["permission"] = {"behavior": decision.behavior.value, "by": decision.decided_by}
        if decision.behavior is not PermissionBehavior.ALLOW:
            meta["error_code"] = "permission_denied"
            reason = decision.reason or "no reason given"
            return ToolOutput(f"Permission denied for {call.name}: {reason}", True), call
        if decision.arguments is not None:  # approved with edited arguments: those run
            if (problem := _schema_problem(tool, decision.arguments)) is not None:
                meta["error_code"] = "invalid_arguments"
                text = f"The arguments approved for {call.name} do not fit it: {problem}"
                return ToolOutput(text, True), call
            call = call.model_copy(update={"arguments": decision.arguments})
            args = tool.input_model.model_validate(decision.arguments)
            meta["permission"]["edited_arguments"] = decision.arguments
        ctx = ToolContext(
            workspace=self.workspace,
            tool_call_id=call.id,
            session_id=self.workspace.session_id,
            run_id=self.run_id,
            agent_id=self.agent_id,
            node_id=node_id,
        )
        before = await self._scan_output() if tool.writes else {}
        output = await self._run(tool, args, ctx, meta)
        if tool.writes:
            meta["files"] = files = await self._report_output_files(before, ctx)
            meta["artifacts"] = [  # output/ files as artifacts, as before "files" existed
                {k: f.get(k) for k in ("path", "size_bytes", "artifact_id")}
                for f in files
                if f["area"] == Area.OUTPUT.value and f["change"] != "deleted"
            ]
        return output, call

    async def _run(
        self, tool: Tool[Any], args: Any, ctx: ToolContext, meta: dict[str, Any]
    ) -> ToolOutput:
        timeout = tool.timeout_for(args)
        try:
            async with asyncio.timeout(timeout):
                return await tool.run(args, ctx)
        except TimeoutError:
            meta["error_code"] = "tool_timeout"
            return ToolOutput(f"{tool.name} timed out after {timeout:g} s", True)
        except AgentCoreError as exc:
            meta["error_code"] = exc.code
            return ToolOutput(redact(exc.message), True)
        except Exception as exc:  # a bug in a tool must not end the run
            meta["error_code"] = "tool_internal_error"
            return ToolOutput(
                f"{tool.name} failed with an internal error ({type(exc).__name__}: "
                f"{redact(str(exc))[:500]})",
                True,
            )

    async def _scan_output(self) -> _Snapshot:
        """Files of ``output/`` and ``scratchpad/`` (size, mtime); an area cut at the scan
        limit is marked by an entry under its own path, so no deletion is guessed from it."""

        def scan() -> _Snapshot:
            files: _Snapshot = {}
            limit = self.settings.max_output_scan
            for area in _WATCHED:
                try:
                    entries = list(self.workspace.fs.walk(area, max_entries=limit))
                except (InvalidPathError, PathEscapeError):
                    continue
                files.update({e.path: (e.size, e.mtime_ns) for e in entries if e.kind == "file"})
                if len(entries) >= limit:
                    files[area] = (-1, -1)
            return files

        return await asyncio.to_thread(scan)

    async def _report_output_files(
        self, before: _Snapshot, ctx: ToolContext
    ) -> list[dict[str, Any]]:
        """What the call changed in ``output/`` and ``scratchpad/``: one record per file created,
        modified or deleted (``path``, ``area``, ``change``, ``size_bytes``); a file of
        ``output/`` created or changed is registered as an artifact (``artifact_id``)."""
        after = await self._scan_output()
        reported: list[dict[str, Any]] = []
        for path, (size, mtime) in sorted(after.items(), key=lambda kv: kv[0].parts):
            old = before.get(path)
            if old == (size, mtime) or path in _WATCHED:
                continue
            area = path.parts[0]
            change = "created" if old is None else "modified"
            record: dict[str, Any] = {"path": str(path), "area": area, "change": change}
            record["size_bytes"] = size
            if area == Area.OUTPUT.value:
                output = OutputFile(
                    path=str(path),
                    size_bytes=size,
                    mime_type=guess_mime(path.name),
                    tool_call_id=ctx.tool_call_id,
                    node_id=ctx.node_id,
                )
                record["artifact_id"] = await self.artifacts.register_output_file(output)
            reported.append(record)
        for path in sorted(before.keys() - after.keys(), key=lambda p: p.parts):
            if path in _WATCHED or SessionPath(path.parts[:1]) in after:
                continue  # an area the scan cut short: its missing files are not known gone
            reported.append({"path": str(path), "area": path.parts[0], "change": "deleted"})
        return reported
