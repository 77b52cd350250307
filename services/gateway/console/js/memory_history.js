// A memory file's history: its versions, newest first, each with the changes that made it; an
// earlier version can be restored (sent with the current ETag, so a file changed meanwhile is
// not overwritten).

import { html, useState } from './lib.js';
import { formatTime } from './format.js';

function historyPath(scope) {
  return scope === 'user' ? '/v1/memory/user' : `/v1/memory/skills/${encodeURIComponent(scope)}`;
}

export function MemoryHistory({ api, scope, etag, onRestored }) {
  const [history, setHistory] = useState(null);
  const [status, setStatus] = useState('');
  const load = () => api.get(`${historyPath(scope)}/history`).then(setHistory, (err) => setStatus(err.message));
  const restore = async (version) => {
    try {
      const file = await api.request('POST', `${historyPath(scope)}/restore`, {
        json: { version }, headers: { 'If-Match': etag ? `"${etag}"` : '*' },
      });
      onRestored(file);
      setStatus('Restored.');
      await load();
    } catch (err) {
      setStatus(err.status === 412 ? 'The file changed meanwhile: reload it first.' : `Not restored: ${err.message}`);
    }
  };
  if (!history) {
    return html`<div class="memory-history"><button onClick=${load}>History</button>
      <span role="status" class="muted">${status}</span></div>`;
  }
  return html`<section class="memory-history" aria-label="Versions of this file">
    <h3>Versions</h3>
    <span role="status" class="muted">${status}</span>
    ${history.versions.length === 0 && html`<p class="muted">No versions yet.</p>`}
    <ol>${history.versions.map((v, i) => html`<li key=${v.version || i} data-version=${v.version || ''}>
      <strong>${formatTime(v.ts)}</strong> · ${v.mode}${v.current ? ' · current' : ''}
      <ul>${v.changes.map((c, j) => html`<li key=${j}>${c.op}${c.new_text ? `: ${c.new_text}` : c.old_text ? `: ${c.old_text}` : ''}</li>`)}</ul>
      ${v.restorable && !v.current && html`<button onClick=${() => restore(v.version)}
        aria-label=${`Restore the version of ${formatTime(v.ts)}`}>Restore this version</button>`}
    </li>`)}</ol>
  </section>`;
}
