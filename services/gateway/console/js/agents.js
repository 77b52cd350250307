// The session's agents: the main (or orchestrator) agent and every worker and fork it started,
// with their names, states, parents and last results, as a tree in a table.

import { html, useEffect, useState } from './lib.js';
import { sessionPath } from './api.js';
import { formatTime, shortId } from './format.js';

/** What to call an agent: the name it was given, else its worker kind or purpose, else its type. */
export function agentName(agent) {
  const m = agent.metadata || {};
  return m.name || m.worker || m.purpose || agent.agent_type;
}

/** Agents in tree order (each after its parent), with their depth. */
function inTreeOrder(agents) {
  const children = {};
  const ids = new Set(agents.map((a) => a.agent_id));
  for (const a of agents) {
    const parent = a.parent_agent_id && ids.has(a.parent_agent_id) ? a.parent_agent_id : null;
    (children[parent] ||= []).push(a);
  }
  const out = [];
  const walk = (parent, depth) => {
    for (const a of children[parent] || []) {
      out.push({ agent: a, depth });
      walk(a.agent_id, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

export function Agents({ ctx, model }) {
  const [agents, setAgents] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    ctx.api.get(sessionPath(ctx.sid, 'agents')).then((r) => setAgents(r.items), (err) => setError(err.message));
  }, [ctx.sid, model.state.runs]);
  if (error) return html`<p class="error-text" role="alert">${error}</p>`;
  if (!agents) return html`<p class="muted">Loading…</p>`;
  return html`<div class="agents table-wrap">
    <table class="files" aria-label="Agents of this session">
      <thead><tr><th scope="col">Agent</th><th scope="col">Type</th><th scope="col">State</th>
        <th scope="col">Started by run</th><th scope="col">Last result</th><th scope="col">Created</th></tr></thead>
      <tbody>${inTreeOrder(agents).map(({ agent, depth }) => html`<tr key=${agent.agent_id} data-agent-id=${agent.agent_id}>
        <td style=${`padding-left: ${8 + depth * 18}px`}><strong>${agentName(agent)}</strong>
          <div class="muted"><code>${shortId(agent.agent_id)}</code>${agent.fork_from_node_id ? html` · forked at <code>${shortId(agent.fork_from_node_id)}</code>` : ''}</div></td>
        <td>${agent.agent_type}</td>
        <td><span class=${`status ${agent.status}`} data-agent-status>${agent.status}</span></td>
        <td>${agent.created_by_run_id ? html`<code>${shortId(agent.created_by_run_id)}</code>` : '—'}</td>
        <td>${agent.result ? `${agent.result.status}${agent.result.text ? `: ${agent.result.text.slice(0, 120)}` : ''}` : '—'}</td>
        <td>${formatTime(agent.created_at)}</td>
      </tr>`)}</tbody>
    </table>
  </div>`;
}
