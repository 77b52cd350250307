// Choosing a named agent (assistant) for a new session: the account's assistants in a select,
// "none" for the deployment's default agent.

import { html, useEffect, useState } from './lib.js';

export function AssistantPicker({ api, value, onChange }) {
  const [names, setNames] = useState([]);
  useEffect(() => {
    api.get('/v1/assistants').then((r) => setNames(r.items.map((a) => a.name)), () => setNames([]));
  }, [api]);
  return html`<label>Assistant <select value=${value} onChange=${(e) => onChange(e.target.value)}>
    <option value="">none (the default agent)</option>
    ${names.map((n) => html`<option key=${n} value=${n}>${n}</option>`)}
  </select></label>`;
}
