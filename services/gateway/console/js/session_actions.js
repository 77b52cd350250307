// A session's whole-session actions in its header: export it as one JSON file, and delete it
// (after a confirmation in place; a session with runs that have not ended is refused by the
// API, and the console says which runs to cancel first).

import { html, useRef, useState } from './lib.js';
import { sessionPath } from './api.js';
import { saveAs } from './download.js';

export function SessionActions({ api, sid, notify }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const cancelButton = useRef(null);

  const exportIt = () => saveAs(api, sessionPath(sid, 'export'), `${sid}.json`)
    .catch((err) => notify(`Not exported: ${err.message}`));
  const ask = () => {
    setError(null);
    setConfirming(true);
    setTimeout(() => cancelButton.current?.focus(), 0); // the safe choice has the focus
  };
  const remove = async () => {
    setBusy(true);
    try {
      await api.request('DELETE', sessionPath(sid));
      setConfirming(false);
      window.dispatchEvent(new CustomEvent('soong:sessions-changed'));
      notify('Session deleted.');
      location.hash = '#/';
    } catch (err) {
      setError(err.code === 'runs_active'
        ? `It has runs that have not ended (${(err.details.run_ids || []).length}): cancel them first.`
        : err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="session-actions">
    <button onClick=${exportIt}>Export JSON</button>
    <button class="danger" onClick=${ask} aria-haspopup="dialog">Delete</button>
    ${confirming && html`<div class="confirm" role="alertdialog" aria-modal="false" aria-labelledby="confirm-delete-text"
        onKeyDown=${(e) => e.key === 'Escape' && setConfirming(false)}>
      <p id="confirm-delete-text">Delete this session with its conversation, runs and files? This cannot be undone.</p>
      ${error && html`<p class="error-text" role="alert">${error}</p>`}
      <button class="danger" disabled=${busy} onClick=${remove}>Delete for good</button>
      <button ref=${cancelButton} onClick=${() => setConfirming(false)}>Keep it</button>
    </div>`}
  </div>`;
}
