// The model's full context at a node: the system prompt and every message of the request, as a
// run-worker builds it from the tree (for a model's answer: what it was sent to write it).

import { html, useState } from './lib.js';
import { sessionPath } from './api.js';
import { prettyJson, shortId } from './format.js';

function MessageBlocks({ blocks }) {
  return (blocks || []).map((b, i) => (b.type === 'text'
    ? html`<pre key=${i} class="text">${b.text}</pre>`
    : html`<pre key=${i} class="json">${prettyJson(b)}</pre>`));
}

export function ModelContext({ ctx, nodeId }) {
  const [context, setContext] = useState(null);
  const [error, setError] = useState(null);
  const load = () => ctx.api.get(sessionPath(ctx.sid, 'nodes', nodeId, 'model_context'))
    .then(setContext, (err) => setError(err.message));
  if (error) return html`<p class="error-text" role="alert">${error}</p>`;
  if (!context) return html`<button onClick=${load}>Full model context</button>`;
  const { request } = context;
  return html`<section class="model-context" aria-label="Full model context">
    <h4>Model context</h4>
    <p class="muted">${context.produced_by_model
      ? `What the model was sent to write this node (built from ${shortId(context.built_from_node_id)}):`
      : 'What the model would be sent if a run continued from this node:'}
      ${request.messages.length} messages, about ${context.report.token_estimate} tokens.</p>
    ${request.system.length > 0 && html`<div class="context-message" data-role="system">
      <h5>system</h5>${request.system.map((s, i) => html`<pre key=${i} class="text">${s.text}</pre>`)}</div>`}
    <ol class="context-messages">${request.messages.map((m, i) => html`<li key=${i} class="context-message" data-role=${m.role}>
      <h5>${m.role}</h5><${MessageBlocks} blocks=${m.content} /></li>`)}</ol>
  </section>`;
}
