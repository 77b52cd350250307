// Approving a tool call with edited arguments: the call's arguments as JSON in an editor; the
// gateway checks them against the tool's input schema (a bad field is named) and the call then
// runs with them.

import { html, useState } from './lib.js';
import { prettyJson } from './format.js';

export function EditArguments({ tool, busy, onAllow }) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState(() => prettyJson(tool.args || {}));
  const [error, setError] = useState(null);
  if (!open) return html`<button disabled=${busy} onClick=${() => setOpen(true)}>Edit arguments</button>`;
  const allow = async () => {
    let args;
    try {
      args = JSON.parse(text);
    } catch {
      setError('The arguments are not valid JSON.');
      return;
    }
    if (!args || typeof args !== 'object' || Array.isArray(args)) {
      setError('The arguments are a JSON object.');
      return;
    }
    setError(null);
    const err = await onAllow(args);
    if (err) {
      const fields = (err.details?.errors || []).map((e) => `${e.field}: ${e.message}`);
      setError(fields.length ? fields.join('; ') : err.message);
    }
  };
  return html`<div class="edit-arguments">
    <textarea rows="6" aria-label=${`Arguments for ${tool.name} (JSON)`} value=${text}
      onInput=${(e) => setText(e.target.value)}></textarea>
    ${error && html`<p class="error-text" role="alert">${error}</p>`}
    <button class="primary" disabled=${busy} onClick=${allow}>Allow with these arguments</button>
    <button disabled=${busy} onClick=${() => setOpen(false)}>Close editor</button>
  </div>`;
}
