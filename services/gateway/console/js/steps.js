// Steps of a conversation, live or stored: tool calls (with their permission requests answered
// in place), child agents, special nodes (compactions, injected context, child results), errors,
// endings and events of any other type, each collapsible.

import { EditArguments } from './permission_edit.js';
import { html, useEffect, useState } from './lib.js';
import { sessionPath } from './api.js';
import { phaseText } from './activity.js';
import { saveAs } from './download.js';
import { blocksText, formatUsage, prettyJson, shortId } from './format.js';

const NODE_LABELS = {
  compaction: 'Compaction',
  child_result: 'Child agent result',
  memory_context: 'Memory',
  skill_context: 'Skill context',
  task_board: 'Task board',
  task_instruction: 'Task instruction',
  plan_instruction: 'Plan instruction',
  system_note: 'Note',
};

const PREVIEW_CHARS = 4000;

function LongText({ text }) {
  const [all, setAll] = useState(false);
  if (text.length <= PREVIEW_CHARS || all) return html`<pre class="text">${text}</pre>`;
  return html`<pre class="text">${text.slice(0, PREVIEW_CHARS)}…</pre>
    <button class="link" onClick=${() => setAll(true)}>Show all ${text.length} characters</button>`;
}

function ArtifactLink({ ctx, artifactId, label }) {
  const download = () => saveAs(ctx.api, sessionPath(ctx.sid, 'artifacts', artifactId, 'content'), label)
    .catch((err) => ctx.notify(err.message));
  return html`<button class="link artifact" data-artifact-id=${artifactId} onClick=${download}>⤓ ${label}</button>`;
}

export function Blocks({ blocks, ctx }) {
  return (blocks || []).map((b, i) => {
    if (b.type === 'text') return html`<${LongText} key=${i} text=${b.text} />`;
    if (b.type === 'artifact_ref') {
      return html`<${ArtifactLink} key=${i} ctx=${ctx} artifactId=${b.artifact_id} label=${b.filename || b.summary || b.artifact_id} />`;
    }
    if (b.type === 'attachment') return html`<span key=${i} class="chip">📎 ${b.filename || b.path}</span>`;
    return html`<pre key=${i} class="json">${prettyJson(b)}</pre>`;
  });
}

function PermissionCard({ tool, ctx }) {
  const [state, setState] = useState({ busy: false, said: null, error: null });
  const decide = async (behavior, args) => {
    setState({ busy: true, said: null, error: null });
    try {
      await ctx.decide(tool.permission.requestId, behavior, args);
      setState({ busy: false, said: args ? 'allow with edited arguments' : behavior, error: null });
      return null;
    } catch (err) {
      const said = err.code === 'already_decided' ? 'decided elsewhere' : null;
      setState({ busy: false, said, error: said || args ? null : err.message });
      return said ? null : err;
    }
  };
  if (state.said) return html`<div class="permission answered" role="status">Permission: ${state.said}</div>`;
  return html`<div class="permission" role="group" aria-label="Permission request" data-request-id=${tool.permission.requestId}>
    <span><strong>${tool.name}</strong> asks for permission${tool.permission.reason ? ` — ${tool.permission.reason}` : ''}</span>
    <button class="primary" disabled=${state.busy} onClick=${() => decide('allow')}>Allow</button>
    <button disabled=${state.busy} onClick=${() => decide('deny')}>Deny</button>
    <${EditArguments} tool=${tool} busy=${state.busy} onAllow=${(args) => decide('allow', args)} />
    ${state.error && html`<span class="error-text">${state.error}</span>`}
  </div>`;
}

function argsPreview(args) {
  const text = JSON.stringify(args || {});
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** The child run a stored tool call started (dispatch_worker, fork_agent), as a line that stays
 * in the conversation after the run ended: its name, status and usage. */
function StoredChild({ run }) {
  return html`<div class="child-agent" data-step="child" data-run-id=${run.run_id} data-child-name=${childName(run) || undefined}>
    <span class="step-kind">child agent</span> <strong>${childName(run) || shortId(run.agent_id)}</strong>
    <span class=${`status ${run.status}`}>${run.status}</span>
    ${run.usage && html`<span class="muted">${formatUsage(run.usage)}</span>`}
  </div>`;
}

function ToolStep({ item, ctx, live }) {
  const waiting = item.permission && !item.permission.decision;
  const made = ctx.artifactsByCall?.[item.callId] || [];
  const children = (!live && ctx.childRunsByCall?.[item.callId]) || []; // live: a lane shows it
  return html`<div class="step-wrap" data-tool-call-id=${item.callId}>
    <details class=${`step tool ${item.status.replace(' ', '-')}`} data-step="tool">
      <summary><span class="step-kind">tool</span> <strong>${item.name}</strong>
        <span class=${`status ${item.status.replace(' ', '-')}`}>${waiting ? 'waiting for permission' : item.status}</span>
        <code class="muted">${argsPreview(item.args)}</code></summary>
      <div class="step-body">
        <h4>Arguments</h4><pre class="json">${prettyJson(item.args)}</pre>
        ${item.result && html`<h4>Result</h4><${Blocks} blocks=${item.result} ctx=${ctx} />`}
        ${item.notes.map((n) => html`<p class="muted" key=${n}>${n}</p>`)}
        ${item.resultNode && html`<button class="link" onClick=${() => ctx.openNode(item.resultNode.node_id)}>Result node details</button>`}
      </div>
    </details>
    ${children.map((run) => html`<${StoredChild} key=${run.run_id} run=${run} />`)}
    ${made.length > 0 && html`<div class="made">made ${made.map((a) => html`<${ArtifactLink} key=${a.artifact_id} ctx=${ctx} artifactId=${a.artifact_id} label=${a.filename || a.path} />`)}</div>`}
    ${waiting && html`<${PermissionCard} tool=${item} ctx=${ctx} />`}
  </div>`;
}

/** A child run's name for people: the worker it was dispatched to, the named assistant it runs
 * as, or "fork"; null when its run record does not say (yet). */
export function childName(run) {
  const meta = run?.metadata || {};
  if (meta.worker) return meta.assistant ? `${meta.worker} (${meta.assistant})` : meta.worker;
  if (meta.fork_from_node_id) return 'fork';
  return meta.assistant || null;
}

/** The name of a live child lane, read once from its run record (the events carry only ids). */
function useChildName(ctx, lane) {
  const [, setTick] = useState(0);
  useEffect(() => {
    if (lane.name !== undefined) return;
    lane.name = null; // asked: ask once
    ctx.api.get(sessionPath(ctx.sid, 'runs', lane.runId)).then((run) => {
      lane.name = childName(run);
      setTick((n) => n + 1);
    }, () => {});
  }, [lane]);
  return lane.name;
}

function ChildStep({ item, ctx, activity }) {
  const lane = activity.children[item.runId];
  const result = lane.finished;
  const name = useChildName(ctx, lane);
  return html`<details class="step child" data-step="child" data-run-id=${item.runId} data-child-name=${name || undefined}>
    <summary><span class="step-kind">child agent</span> <strong>${name || shortId(lane.agentId || item.runId)}</strong>
      <span class=${`status ${lane.status}`}>${lane.status}</span>
      ${!result && lane.phase && html`<span class="phase" data-phase=${lane.phase.phase}>${phaseText(lane.phase)}</span>`}
      ${lane.usage && html`<span class="muted">${formatUsage(lane.usage)}</span>`}</summary>
    <div class="step-body">
      ${lane.items.map((child) => html`<${Step} key=${child.key} item=${child} ctx=${ctx} activity=${activity} />`)}
      ${result?.error && html`<p class="error-text">${result.error.code}: ${result.error.message}</p>`}
    </div>
  </details>`;
}

function NodeStep({ item, ctx }) {
  const { node } = item;
  const label = NODE_LABELS[node.node_type] || node.node_type;
  const text = blocksText(node.content);
  return html`<details class=${`step node ${node.node_type}`} data-step=${node.node_type} data-node-id=${node.node_id}>
    <summary><span class="step-kind">${label}</span> <span class="muted">${text.slice(0, 90)}</span></summary>
    <div class="step-body">
      <${Blocks} blocks=${node.content} ctx=${ctx} />
      <button class="link" onClick=${() => ctx.openNode(node.node_id)}>Node details</button>
    </div>
  </details>`;
}

function EventStep({ item }) {
  return html`<details class="step event" data-step="event" data-event-type=${item.type}>
    <summary><span class="step-kind">${item.type}</span></summary>
    <div class="step-body"><pre class="json">${prettyJson(item.data)}</pre></div>
  </details>`;
}

/** One display item, of any kind. */
export function Step({ item, ctx, activity }) {
  switch (item.kind) {
    case 'tool': return html`<${ToolStep} item=${item} ctx=${ctx} live=${Boolean(activity)} />`;
    case 'child': return html`<${ChildStep} item=${item} ctx=${ctx} activity=${activity} />`;
    case 'node': return html`<${NodeStep} item=${item} ctx=${ctx} />`;
    case 'text': return html`<div class="msg assistant streaming" data-live-text>${item.text}</div>`;
    case 'note': return html`<p class="note muted">${item.text}</p>`;
    case 'error': return html`<div class="error-box" role="alert">
        ${item.fatal ? 'Fatal error' : 'Error'}: <code data-error-code=${item.error?.code}>${item.error?.code}</code> ${item.error?.message}</div>`;
    default: return html`<${EventStep} item=${item} />`;
  }
}
