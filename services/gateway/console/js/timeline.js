// The run timeline: every run of the session with its status, end reason, usage, duration and
// error, and on demand the run's durable events in order (time from the run's start, type,
// tool call, payload). Runs in flight show the live status their events report.

import { html, useEffect, useState } from './lib.js';
import { sessionPath, withQuery } from './api.js';
import { isTerminal, waitingPermissions } from './activity.js';
import { formatDuration, formatTime, formatUsage, prettyJson, shortId } from './format.js';
import { childName } from './steps.js';

const PAGE = 500;

async function runEvents(ctx, runId) {
  const items = [];
  let after = 0;
  for (;;) {
    const page = await ctx.api.get(withQuery(sessionPath(ctx.sid, 'events'), { run_id: runId, after_seq: after, limit: PAGE }));
    items.push(...page.items);
    if (!page.next_after_seq || page.items.length < PAGE) return items;
    after = page.next_after_seq;
  }
}

function RunEvents({ ctx, run }) {
  const [events, setEvents] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    runEvents(ctx, run.run_id).then(setEvents, (err) => setError(err.message));
  }, [run.run_id, run.status, run.updated_at]);
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!events) return html`<p class="muted">Loading events…</p>`;
  const start = new Date(run.created_at).getTime();
  return html`<ol class="events">
    ${events.map((e) => html`<li key=${e.event_id} class=${`event level-${e.level}`} data-event-type=${e.event_type}>
      <span class="muted t">+${formatDuration(new Date(e.created_at).getTime() - start) || '0 ms'}</span>
      <strong>${e.event_type}</strong>
      ${e.tool_call_id && html`<code class="muted">${e.tool_call_id}</code>`}
      ${Object.keys(e.payload || {}).length > 0 && html`<details><summary>payload</summary><pre class="json">${prettyJson(e.payload)}</pre></details>`}
    </li>`)}
  </ol>`;
}

function duration(run) {
  const end = isTerminal(run.status) ? new Date(run.updated_at).getTime() : Date.now();
  return formatDuration(end - new Date(run.created_at).getTime());
}

function RunRow({ ctx, run, live, rootAgent }) {
  const waiting = live && !isTerminal(run.status) && waitingPermissions(live).length > 0;
  const status = live?.status && !isTerminal(run.status) ? live.status : run.status;
  const usage = live?.usage && !isTerminal(run.status) ? live.usage : run.usage;
  const [open, setOpen] = useState(false);
  return html`<details class=${`run-row ${status}`} data-run-id=${run.run_id} data-status=${status}
    onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary>
      <span class=${`status ${waiting ? 'waiting' : status}`}>${waiting ? 'waiting for permission' : status}</span>
      <code>${shortId(run.run_id)}</code>
      <span class="muted">${run.agent_id === rootAgent ? 'main' : `child ${childName(run) || shortId(run.agent_id)}`}</span>
      ${run.end_reason && html`<span>ended: ${run.end_reason}</span>`}
      <span class="muted">${formatUsage(usage)}</span>
      <span class="muted">${run.turn} turn${run.turn === 1 ? '' : 's'}</span>
      <span class="muted">${duration(run)}</span>
      <span class="muted">${formatTime(run.created_at)}</span>
    </summary>
    ${run.error && html`<div class="error-box"><code data-error-code=${run.error.code}>${run.error.code}</code> ${run.error.message}</div>`}
    ${open && html`<${RunEvents} ctx=${ctx} run=${run} />`}
  </details>`;
}

export function Timeline({ model, ctx }) {
  const { state, activities } = model;
  const live = Object.fromEntries(activities.map((a) => [a.runId, a]));
  // A run this page follows but has not read as a record yet (just sent) is listed from its
  // activity: a run in flight is never missing here.
  const known = new Set(state.runs.map((r) => r.run_id));
  const inFlight = activities.filter((a) => !known.has(a.runId)).map((a) => ({
    run_id: a.runId, status: a.status, agent_id: a.agentId || state.session?.root_agent_id,
    turn: a.phase?.turn || 0, usage: a.usage, created_at: new Date().toISOString(),
    updated_at: new Date().toISOString(), end_reason: null, error: null,
  }));
  const runs = [...state.runs, ...inFlight].reverse();
  if (!runs.length) return html`<p class="empty">No runs yet.</p>`;
  return html`<div class="timeline">
    <p class="muted">${runs.length} run${runs.length === 1 ? '' : 's'}, newest first. Open one for its events.</p>
    ${runs.map((run) => html`<${RunRow} key=${run.run_id} ctx=${ctx} run=${run} live=${live[run.run_id]}
      rootAgent=${state.session?.root_agent_id} />`)}
  </div>`;
}
