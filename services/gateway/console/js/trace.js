// A run's trace: its steps in time order with their durations, from the run's events on the
// timeline. Each event ends a step that began with the event before it: a `node_created` of the
// assistant ends a model call, one of a tool result ends the tool's run. Nodes are named by their
// preview in the tree ("[tool_call write_file]"). A tool call's span runs from its first event
// to its last. Bars show where each step sits in the run (decorative: the table says it all).

import { html, useEffect, useState } from './lib.js';
import { sessionPath, withQuery } from './api.js';
import { formatDuration, shortId } from './format.js';

/** The steps of a run from its events (pure): offset and duration in ms, tool spans paired. */
export function traceSteps(events) {
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  if (!sorted.length) return { steps: [], total: 0 };
  const t = (e) => Date.parse(e.created_at);
  const start = t(sorted[0]);
  const spans = {};
  for (const e of sorted) {
    if (!e.tool_call_id) continue;
    const span = (spans[e.tool_call_id] ||= { first: t(e), last: t(e) });
    span.last = t(e);
  }
  const steps = sorted.map((e, i) => {
    const previous = i ? t(sorted[i - 1]) : t(e);
    const span = e.tool_call_id ? spans[e.tool_call_id] : null;
    return {
      event: e,
      offset: previous - start,
      duration: t(e) - previous,
      toolSpan: span && span.last === t(e) && span.last > span.first ? span.last - span.first : null,
    };
  });
  return { steps, total: t(sorted[sorted.length - 1]) - start };
}

const NODE_STEPS = { assistant: 'model call', tool: 'tool run', user: 'message placed' };

function label(e, previews) {
  const p = e.payload || {};
  if (e.event_type === 'node_created') {
    const step = NODE_STEPS[p.role] || 'node';
    return `${step} → ${p.role || ''} ${p.node_type || ''}${previews[e.node_id] ? ` · ${previews[e.node_id]}` : ''}`;
  }
  const what = p.tool || p.name || p.status || p.end_reason || p.behavior || '';
  return what ? `${e.event_type} · ${what}` : e.event_type;
}

export function Trace({ ctx, model }) {
  const runs = model.state.runs;
  const [runId, setRunId] = useState(null);
  const [events, setEvents] = useState(null);
  const [previews, setPreviews] = useState({});
  const [error, setError] = useState(null);
  const chosen = runId || (runs.length ? runs[runs.length - 1].run_id : null);
  useEffect(() => {
    if (!chosen) return;
    setEvents(null);
    Promise.all([
      ctx.api.get(withQuery(sessionPath(ctx.sid, 'events'), { run_id: chosen, limit: 1000 })),
      ctx.api.get(sessionPath(ctx.sid, 'tree')),
    ]).then(([r, tree]) => {
      setPreviews(Object.fromEntries(tree.nodes.map((n) => [n.node_id, n.preview])));
      setEvents(r.items);
    }, (err) => setError(err.message));
  }, [chosen, runs]);
  if (!runs.length) return html`<p class="muted">No runs yet.</p>`;
  const { steps, total } = events ? traceSteps(events) : { steps: [], total: 0 };
  return html`<div class="trace">
    <label>Run <select value=${chosen} onChange=${(e) => setRunId(e.target.value)}>
      ${[...runs].reverse().map((r) => html`<option key=${r.run_id} value=${r.run_id}>${shortId(r.run_id)} · ${r.status}</option>`)}
    </select></label>
    ${error && html`<p class="error-text" role="alert">${error}</p>`}
    ${!events && !error && html`<p class="muted">Loading…</p>`}
    ${events && html`<p class="muted" data-trace-total>${steps.length} steps in ${formatDuration(total)}</p>
    <div class="table-wrap"><table class="files trace-table" aria-label=${`Trace of run ${chosen}`}>
      <thead><tr><th scope="col">Step</th><th scope="col">Began</th><th scope="col">Took</th><th scope="col"><span class="sr-only">Timeline</span></th></tr></thead>
      <tbody>${steps.map((s) => html`<tr key=${s.event.event_id} data-trace-step=${s.event.event_type}>
        <td>${label(s.event, previews)}${s.event.tool_call_id ? html` <code class="muted">${shortId(s.event.tool_call_id)}</code>` : ''}</td>
        <td>+${formatDuration(s.offset) || '0 ms'}</td>
        <td data-duration-ms=${s.duration}>${formatDuration(s.duration) || '0 ms'}${s.toolSpan !== null ? html`<div class="muted">tool ${formatDuration(s.toolSpan) || '0 ms'}</div>` : ''}</td>
        <td class="trace-bar-cell" aria-hidden="true"><span class="trace-bar"
          style=${`margin-left: ${total ? (100 * s.offset) / total : 0}%; width: ${total ? Math.max(0.5, (100 * s.duration) / total) : 100}%`}></span></td>
      </tr>`)}</tbody>
    </table></div>`}
  </div>`;
}
