// A node on demand: its content, metadata and token count, what the model would see from it,
// and the two moves from it: make it the active node, or branch a new message from it.

import { html, useEffect, useState } from './lib.js';
import { sessionPath } from './api.js';
import { Blocks } from './steps.js';
import { formatTime, prettyJson, shortId } from './format.js';
import { ModelContext } from './model_context.js';

function ContextReport({ ctx, nodeId }) {
  const [report, setReport] = useState(null);
  const [error, setError] = useState(null);
  const load = () => ctx.api.get(sessionPath(ctx.sid, 'nodes', nodeId, 'context'))
    .then(setReport, (err) => setError(err.message));
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!report) return html`<button onClick=${load}>What the model would see from here</button>`;
  return html`<div class="context-report">
    <p>${report.node_ids.length} nodes, about <strong>${report.token_estimate}</strong> tokens</p>
    ${report.budget && html`<p data-budget>Budget: ~${report.budget.total} of ${report.budget.input_budget} input tokens (system ${report.budget.system}, pinned ${report.budget.pinned}, history ${report.budget.history}, tools ${report.budget.tools}); compacts past ${report.budget.compact_at}</p>`}
    ${report.compaction_node_id && html`<p>Compaction ${shortId(report.compaction_node_id)} stands for ${report.compacted} earlier nodes (kept in the tree)</p>`}
    ${report.injected.length > 0 && html`<p>Injected: ${report.injected.map((i) => `${i.node_type} (${i.source}, ~${i.token_estimate})`).join(', ')}</p>`}
    ${report.dropped.length > 0 && html`<p>Dropped: ${report.dropped.map((d) => `${shortId(d.node_id)} (${d.reason})`).join(', ')}</p>`}
  </div>`;
}

export function NodeDetail({ ctx, nodeId, onClose, isActive }) {
  const [node, setNode] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setNode(null);
    setError(null);
    ctx.api.get(sessionPath(ctx.sid, 'nodes', nodeId)).then(setNode, (err) => setError(err.message));
  }, [nodeId]);
  return html`<aside class="node-detail" aria-label="Node details" data-node-detail=${nodeId}>
    <header>
      <h3>Node <code>${shortId(nodeId)}</code></h3>
      ${onClose && html`<button class="link" onClick=${onClose} aria-label="Close details">✕</button>`}
    </header>
    ${error && html`<p class="error-text">${error}</p>`}
    ${!node && !error && html`<p class="muted">Loading…</p>`}
    ${node && html`
      <div class="node-actions">
        <button class="primary" disabled=${isActive} onClick=${() => ctx.switchTo(node.node_id)}>
          ${isActive ? 'Active node' : 'Switch here'}</button>
        ${node.role === 'user'
          ? html`<button onClick=${() => ctx.branchFrom({ ...node, node_id: node.parent_id ?? 'root', replacing: true })}>Edit as new branch</button>`
          : html`<button onClick=${() => ctx.branchFrom(node)}>Branch from here</button>`}
      </div>
      <dl class="facts">
        <dt>role</dt><dd>${node.role}</dd>
        <dt>type</dt><dd>${node.node_type}</dd>
        <dt>seq</dt><dd>${node.node_seq}</dd>
        <dt>tokens</dt><dd data-token-count>${node.token_count ?? 'not counted'}</dd>
        <dt>run</dt><dd><code>${node.run_id || '—'}</code></dd>
        <dt>agent</dt><dd><code>${node.agent_id}</code></dd>
        <dt>created</dt><dd>${formatTime(node.created_at)}</dd>
      </dl>
      <h4>Content</h4>
      <${Blocks} blocks=${node.content} ctx=${ctx} />
      <details><summary>Content as stored</summary><pre class="json">${prettyJson(node.content)}</pre></details>
      <h4>Metadata</h4>
      <pre class="json">${prettyJson(node.metadata)}</pre>
      <${ContextReport} ctx=${ctx} nodeId=${node.node_id} />
      <${ModelContext} ctx=${ctx} nodeId=${node.node_id} />`}
  </aside>`;
}
