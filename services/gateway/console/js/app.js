// The console's shell: sign-in gate, top bar, session list, and the view the URL names.

import {
  html, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState,
} from './lib.js';
import { Api, forgetKey, saveKey, savedKey } from './api.js';
import { useRoute } from './route.js';
import { SignIn } from './signin.js';
import { Sessions } from './sessions.js';
import { SessionView } from './session.js';
import { Memory } from './memory.js';
import { Assistants } from './assistants.js';

function useToasts() {
  const [toasts, setToasts] = useState([]);
  const next = useRef(0);
  const notify = useCallback((message) => {
    next.current += 1;
    const id = next.current;
    setToasts((t) => [...t, { id, message }]);
    setTimeout(() => setToasts((t) => t.filter((x) => x.id !== id)), 6000);
  }, []);
  return [toasts, notify];
}

function Home() {
  return html`<div class="home">
    <h2>Welcome</h2>
    <p>Pick a session on the left or create one. Each session keeps its conversation as a tree you
      can branch, its runs with their events, its files, and its task lists. Memory is shared by
      all your sessions. Assistants lists your named agents and the URLs MCP, OpenAI and A2A
      clients call them at.</p>
    <p class="muted">Keys: <kbd>/</kbd> searches sessions; in a message <kbd>Enter</kbd> sends and
      <kbd>Shift</kbd>+<kbd>Enter</kbd> starts a new line; arrow keys move between tabs and tree nodes;
      <kbd>Escape</kbd> closes a node's details. The <a href="/docs" target="_blank" rel="noopener">API docs</a>
      describe every route.</p>
  </div>`;
}

export function App() {
  const [key, setKey] = useState(savedKey());
  const [reason, setReason] = useState(null);
  const [toasts, notify] = useToasts();
  const route = useRoute();
  const [drawer, setDrawer] = useState(false); // the session list below 900 px
  const hash = `${route.view}:${route.sid || ''}:${route.tab || ''}`;
  useEffect(() => { setDrawer(false); }, [hash]); // a session opened: the drawer gives way
  useLayoutEffect(() => { // layout: listening from the moment the drawer shows
    if (!drawer) return undefined;
    const onKey = (event) => { if (event.key === 'Escape') setDrawer(false); };
    // A session picked (even the one already open: no route change then) closes it too.
    const onClick = (event) => { if (event.target.closest?.('a[data-session-id]')) setDrawer(false); };
    document.addEventListener('keydown', onKey);
    document.addEventListener('click', onClick);
    return () => {
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('click', onClick);
    };
  }, [drawer]);
  const api = useMemo(() => (key ? new Api(key, {
    onUnauthorized: () => {
      forgetKey();
      setReason('The gateway no longer accepts this key: sign in again.');
      setKey(null);
    },
  }) : null), [key]);
  const signOut = () => {
    forgetKey();
    setReason(null);
    setKey(null);
  };
  if (!api) return html`<${SignIn} reason=${reason} onSignedIn=${(k) => { saveKey(k); setKey(k); }} />`;
  let main;
  if (route.view === 'session') main = html`<${SessionView} key=${route.sid} api=${api} sid=${route.sid} tab=${route.tab} notify=${notify} />`;
  else if (route.view === 'memory') main = html`<${Memory} api=${api} notify=${notify} />`;
  else if (route.view === 'assistants') main = html`<${Assistants} api=${api} notify=${notify} />`;
  else main = html`<${Home} />`;
  return html`<div class="layout">
    <header class="topbar">
      <button class="drawer-toggle" aria-controls="sessions" aria-expanded=${drawer ? 'true' : 'false'}
        onClick=${() => setDrawer((open) => !open)}>Sessions</button>
      <a class="brand" href="#/">soong-agent</a>
      <a href="#/memory" class=${route.view === 'memory' ? 'current' : ''}
        aria-current=${route.view === 'memory' ? 'page' : undefined}>Memory</a>
      <a href="#/assistants" class=${route.view === 'assistants' ? 'current' : ''}
        aria-current=${route.view === 'assistants' ? 'page' : undefined}>Assistants</a>
      <a class="docs-link" href="/docs" target="_blank" rel="noopener">API docs</a>
      <span class="spacer"></span>
      <button class="link" onClick=${signOut}>Sign out</button>
    </header>
    <${Sessions} api=${api} route=${route} notify=${notify} open=${drawer} />
    <main class="main">${main}</main>
    <div class="toasts" role="status" aria-live="polite">${toasts.map((t) => html`<div class="toast" key=${t.id}>${t.message}</div>`)}</div>
  </div>`;
}
