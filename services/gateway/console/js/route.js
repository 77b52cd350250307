// Where the page is, in the URL's hash: `#/s/<session>/<tab>`, `#/memory`, `#/assistants`, or
// home. The hash keeps the place across a reload and never reaches the server.

import { useEffect, useState } from './lib.js';

export const TABS = ['chat', 'tree', 'runs', 'files', 'tasks', 'agents', 'trace'];

export function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 's' && parts[1]) {
    return { view: 'session', sid: parts[1], tab: TABS.includes(parts[2]) ? parts[2] : 'chat' };
  }
  if (parts[0] === 'memory') return { view: 'memory' };
  if (parts[0] === 'assistants') return { view: 'assistants' };
  return { view: 'home' };
}

export function sessionHref(sid, tab = 'chat') {
  return `#/s/${encodeURIComponent(sid)}/${tab}`;
}

export function useRoute() {
  const [route, setRoute] = useState(parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
