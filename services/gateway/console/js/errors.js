// An API error for people: its message and, when the API names them (a validation error, an
// invalid agent configuration), every field at fault with its reason, one per line.

import { html } from './lib.js';

/** The `{field, message}` pairs of an error's details (`details.errors`), field paths shortened
 * to what the person typed (`body.agent_config.max_turns` → `max_turns`). */
export function fieldErrors(error) {
  const listed = Array.isArray(error?.details?.errors) ? error.details.errors : [];
  return listed.map((e) => ({
    field: String(e.field || '').replace(/^body\./, '').replace(/^agent_config\./, '') || 'request',
    message: String(e.message || ''),
  }));
}

/** An error as an alert: a string as it is, an ApiError with its fields listed. */
export function ErrorAlert({ error }) {
  if (!error) return null;
  if (typeof error === 'string') return html`<p class="error-text" role="alert">${error}</p>`;
  const fields = fieldErrors(error);
  if (!fields.length) return html`<p class="error-text" role="alert">${error.message}</p>`;
  return html`<div class="error-text" role="alert">
    <p>${fields.length === 1 ? 'One field is invalid:' : `${fields.length} fields are invalid:`}</p>
    <ul class="field-errors">${fields.map((f) => html`<li key=${f.field} data-field=${f.field}><code>${f.field}</code>: ${f.message}</li>`)}</ul>
  </div>`;
}
