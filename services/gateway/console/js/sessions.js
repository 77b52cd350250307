// The session list: newest first, with paging, archived sessions on request, a search by title
// and message text (the API's index: `GET /v1/sessions?q=`) or by id, and a form to create one
// (title, mode, a named assistant, optional agent configuration).

import { html, useCallback, useEffect, useRef, useState } from './lib.js';
import { sessionPath, withQuery } from './api.js';
import { sessionHref } from './route.js';
import { formatTime, sessionTitle, shortId } from './format.js';
import { ErrorAlert } from './errors.js';
import { AssistantPicker } from './assistant_pick.js';

const PAGE = 50;

const SEARCH_DELAY_MS = 250; // typing pauses this long before the API is asked

/** The server's search results for `query` (null while there is no query). */
function useSearch(api, query, archived, notify) {
  const [found, setFound] = useState(null);
  useEffect(() => {
    const q = query.trim();
    if (!q || /^sess_[A-Za-z0-9_]+$/.test(q)) {
      setFound(null);
      return undefined;
    }
    let stale = false;
    const timer = setTimeout(() => {
      api.get(withQuery('/v1/sessions', { q, status: archived ? 'archived' : 'active', limit: PAGE }))
        .then((page) => {
          if (stale) return;
          const snippets = Object.fromEntries((page.matches || []).map((m) => [m.session_id, m.snippet]));
          setFound(page.items.map((s) => ({ ...s, snippet: snippets[s.session_id] })));
        }, (err) => !stale && notify(err.message));
    }, SEARCH_DELAY_MS);
    return () => { stale = true; clearTimeout(timer); };
  }, [api, query, archived]);
  return found;
}

function NewSession({ api, onCreated, onCancel }) {
  const [title, setTitle] = useState('');
  const [mode, setMode] = useState('agent');
  const [assistant, setAssistant] = useState('');
  const [config, setConfig] = useState('');
  const [error, setError] = useState(null);
  const first = useRef(null);
  useEffect(() => { first.current?.focus(); }, []); // the form opened: typing goes in it
  const submit = async (event) => {
    event.preventDefault();
    const body = { mode, metadata: title.trim() ? { title: title.trim() } : {} };
    if (assistant) body.assistant = assistant;
    if (config.trim()) {
      try {
        body.agent_config = JSON.parse(config);
      } catch {
        setError('The agent configuration is not valid JSON.');
        return;
      }
    }
    try {
      onCreated(await api.post('/v1/sessions', body));
    } catch (err) {
      setError(err); // every invalid field with its reason
    }
  };
  return html`<form class="new-session" onSubmit=${submit} aria-label="New session">
    <label>Title <input ref=${first} value=${title} onInput=${(e) => setTitle(e.target.value)} placeholder="optional" /></label>
    <label>Mode <select value=${mode} onChange=${(e) => setMode(e.target.value)}>
      <option value="agent">agent</option>
      <option value="orchestrator">orchestrator (plans and delegates to workers)</option>
    </select></label>
    <${AssistantPicker} api=${api} value=${assistant} onChange=${setAssistant} />
    <details><summary>Agent configuration</summary>
      <textarea rows="4" aria-label="Agent configuration (JSON)" value=${config} onInput=${(e) => setConfig(e.target.value)}
        placeholder='{"max_turns": 8, "tool_policy": {"default": "allow", "ask": ["write_file"]}}'></textarea>
    </details>
    <${ErrorAlert} error=${error} />
    <div class="row"><button class="primary" type="submit">Create</button>
      <button type="button" onClick=${onCancel}>Cancel</button></div>
  </form>`;
}

export function Sessions({ api, route, notify, open = false }) {
  const [items, setItems] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [archived, setArchived] = useState(false);
  const [query, setQuery] = useState('');
  const [creating, setCreating] = useState(false);
  const search = useRef(null);
  const newButton = useRef(null);

  const load = useCallback(async (more = false) => {
    try {
      const page = await api.get(withQuery('/v1/sessions', {
        limit: PAGE, status: archived ? 'archived' : 'active', cursor: more ? cursor : null,
      }));
      setItems((old) => (more ? [...old, ...page.items] : page.items));
      setCursor(page.next_cursor);
    } catch (err) {
      notify(err.message);
    }
  }, [api, archived, cursor, notify]);

  useEffect(() => { load(false); }, [api, archived]);
  useEffect(() => {
    const onChanged = () => load(false);
    const onKey = (event) => {
      if (event.key === '/' && !['INPUT', 'TEXTAREA', 'SELECT'].includes(document.activeElement?.tagName)) {
        event.preventDefault();
        search.current?.focus();
      }
    };
    window.addEventListener('soong:sessions-changed', onChanged);
    window.addEventListener('keydown', onKey);
    return () => {
      window.removeEventListener('soong:sessions-changed', onChanged);
      window.removeEventListener('keydown', onKey);
    };
  }, [load]);

  const openById = async () => {
    try {
      const session = await api.get(sessionPath(query.trim()));
      location.hash = sessionHref(session.session_id);
    } catch (err) {
      notify(err.status === 404 ? `No session ${query.trim()}` : err.message);
    }
  };
  const found = useSearch(api, query, archived, notify);
  const q = query.trim().toLowerCase();
  // The index finds titles and message text; a piece of an id is matched among those loaded.
  const byId = q ? items.filter((s) => s.session_id.toLowerCase().includes(q)) : items;
  const shown = found ? [...found, ...byId.filter((s) => !found.some((f) => f.session_id === s.session_id))] : byId;
  const looksLikeId = /^sess_[A-Za-z0-9_]+$/.test(query.trim());
  return html`<nav class=${open ? 'sessions open' : 'sessions'} id="sessions" aria-label="Sessions">
    <div class="sessions-head">
      <button class="primary" ref=${newButton} onClick=${() => setCreating(true)}>New session</button>
      <label class="check"><input type="checkbox" checked=${archived} onChange=${(e) => setArchived(e.target.checked)} /> archived</label>
    </div>
    ${creating && html`<${NewSession} api=${api} onCancel=${() => { setCreating(false); newButton.current?.focus(); }}
      onCreated=${(s) => {
        setCreating(false);
        load(false);
        window.dispatchEvent(new CustomEvent('soong:focus-composer')); // once the chat is there
        location.hash = sessionHref(s.session_id);
      }} />`}
    <input ref=${search} type="search" class="search" aria-label="Search sessions by title or id"
      placeholder="Search titles, messages or id  ( / )" value=${query} onInput=${(e) => setQuery(e.target.value)} />
    <ul class="session-list">
      ${shown.map((s) => html`<li key=${s.session_id}>
        <a href=${sessionHref(s.session_id, route.view === 'session' ? route.tab : 'chat')} data-session-id=${s.session_id}
          class=${route.sid === s.session_id ? 'current' : ''} aria-current=${route.sid === s.session_id ? 'page' : undefined}>
          <span class="title">${sessionTitle(s) || 'Untitled'}</span>
          <span class="muted">${shortId(s.session_id)} · ${formatTime(s.updated_at)}</span>
          ${s.snippet && html`<span class="snippet" data-snippet>${s.snippet}</span>`}
        </a></li>`)}
    </ul>
    ${shown.length === 0 && !looksLikeId && html`<p class="muted">No ${archived ? 'archived ' : ''}sessions${query ? ' match' : ''}.</p>`}
    ${looksLikeId && !shown.length && html`<button class="link" onClick=${openById}>Open ${query.trim()}</button>`}
    ${cursor && !found && html`<button class="link" onClick=${() => load(true)}>Load more</button>`}
  </nav>`;
}
