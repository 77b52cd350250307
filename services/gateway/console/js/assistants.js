// Assistants: the account's named agents, and where other clients call each one — as an MCP
// tool, through the OpenAI-compatible endpoint, and as an A2A agent. The URLs are built from
// the page's origin (the gateway serves the console), each shown as selectable text with a copy
// button.

import { html, useEffect, useRef, useState } from './lib.js';

/** The three ways to call an assistant from `gateway` (an origin such as `location.origin`). */
export function endpointsOf(gateway, name) {
  const base = gateway.replace(/\/+$/, '');
  return {
    mcp: `${base}/mcp`,
    openai: `${base}/v1/openai`,
    a2aCard: `${base}/a2a/${encodeURIComponent(name)}/.well-known/agent-card.json`,
  };
}

/** Puts `text` on the clipboard; false when the browser does not allow it here. */
async function copyText(text) {
  if (!navigator.clipboard) return false; // only in a secure context (HTTPS or localhost)
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** A value to copy: the text itself (selectable) and a Copy button named after `label`. */
function Copyable({ label, value, kind, notify }) {
  const text = useRef(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (!copied) return undefined;
    const timer = setTimeout(() => setCopied(false), 2000);
    return () => clearTimeout(timer);
  }, [copied]);
  const copy = async () => {
    if (await copyText(value)) {
      setCopied(true);
      return;
    }
    // No clipboard here (a page served over plain HTTP from another host): select the text,
    // so that the keyboard's copy takes it.
    window.getSelection()?.selectAllChildren(text.current);
    notify('The browser does not allow copying here: the text is selected, press Ctrl+C.');
  };
  return html`<span class="copyable">
    <code ref=${text} data-endpoint=${kind}>${value}</code>
    <button type="button" aria-label=${`Copy ${label}`} onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
  </span>`;
}

function AssistantCard({ assistant, gateway, notify }) {
  const { name } = assistant;
  const urls = endpointsOf(gateway, name);
  const heading = `assistant-${assistant.assistant_id}`;
  return html`<section class="assistant" data-assistant=${name} aria-labelledby=${heading}>
    <h3 id=${heading}>${name} <span class="muted">v${assistant.latest_version}</span></h3>
    ${assistant.description
      ? html`<p>${assistant.description}</p>`
      : html`<p class="muted">No description.</p>`}
    <dl class="endpoints">
      <dt>MCP</dt>
      <dd>
        <${Copyable} label=${`MCP URL of ${name}`} value=${urls.mcp} kind="mcp" notify=${notify} />
        <span class="muted">Streamable HTTP; the tool is named <code>${name}</code>.</span>
      </dd>
      <dt>OpenAI</dt>
      <dd>
        <${Copyable} label=${`OpenAI base URL of ${name}`} value=${urls.openai} kind="openai" notify=${notify} />
        <span class="muted">base URL, with <code>model</code> =</span>
        <${Copyable} label=${`OpenAI model name of ${name}`} value=${name} kind="model" notify=${notify} />
      </dd>
      <dt>A2A</dt>
      <dd>
        <${Copyable} label=${`A2A agent card URL of ${name}`} value=${urls.a2aCard} kind="a2a" notify=${notify} />
        <span class="muted">the agent card; it names the JSON-RPC endpoint.</span>
      </dd>
    </dl>
  </section>`;
}

export function Assistants({ api, notify }) {
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api.get('/v1/assistants').then((list) => {
    setItems(list.items);
    setError(null);
  }, (err) => setError(err.message));
  useEffect(() => { load(); }, [api]);
  const gateway = location.origin;
  let body;
  if (error) body = html`<p class="error-text" role="alert">${error}</p>`;
  else if (!items) body = html`<p class="muted">Loading assistants…</p>`;
  else if (!items.length) {
    body = html`<div class="empty-assistants" data-empty>
      <p><strong>No assistants yet.</strong> An assistant is a named agent of your account: its
        instructions, model, tools and limits. Create one from the command line:</p>
      <pre class="text">soong-agent assistants create --file reviewer.json</pre>
      <p>or with <code>POST /v1/assistants</code> (<a href="/docs" target="_blank" rel="noopener">API docs</a>),
        a body such as:</p>
      <pre class="text">{"name": "reviewer", "description": "Reviews patches",
 "instructions": "You review code changes. Be brief."}</pre>
    </div>`;
  } else {
    body = items.map((a) => html`<${AssistantCard} key=${a.assistant_id} assistant=${a} gateway=${gateway} notify=${notify} />`);
  }
  return html`<div class="assistants">
    <div class="assistants-head">
      <h2>Assistants</h2>
      <button type="button" onClick=${() => load()}>Reload</button>
    </div>
    <p class="muted">Your named agents, and where other clients call them: MCP clients, code
      written for the OpenAI API, and A2A agents. Each call is a run of a new session (or of the
      one it continues) and takes your API key as <code>Authorization: Bearer …</code>.</p>
    ${body}
  </div>`;
}
