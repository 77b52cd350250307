// Sign in with an API key: checked against the API, then kept in this tab's sessionStorage only.

import { html, useState } from './lib.js';
import { Api } from './api.js';

export function SignIn({ onSignedIn, reason }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(reason || null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await new Api(key.trim()).get('/v1/sessions?limit=1');
      onSignedIn(key.trim());
    } catch (err) {
      setError(err.status === 401 ? 'The gateway did not accept this key.' : err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="signin">
    <form onSubmit=${submit} aria-label="Sign in">
      <h1>soong-agent</h1>
      <p class="muted">Sign in with an API key (<code>soong-agent keys create --account NAME</code>;
        <code>make run</code> prints one). It stays in this browser tab only.</p>
      <label for="api-key">API key</label>
      <input id="api-key" type="password" autocomplete="off" autofocus value=${key}
        onInput=${(e) => setKey(e.target.value)} placeholder="sa_live_…" />
      ${error && html`<p class="error-text" role="alert">${error}</p>`}
      <button class="primary" type="submit" disabled=${busy || !key.trim()}>Sign in</button>
    </form>
  </main>`;
}
