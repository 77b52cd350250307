// One session's state in the page: the session, the active path, its runs and artifacts, and the
// live activity of every main run that has not ended, followed over SSE.
//
// Activities live in a ref (they are folded in place as events arrive) and `version` re-renders
// the views after each batch. When a followed run ends, the path and runs are read again and
// its activity is dropped in the same render: the conversation then shows the stored nodes.
// After a reload, every run that has not ended is followed again from the start of its stream,
// so the activity is rebuilt whole, and each event id is applied once.

import { useCallback, useEffect, useMemo, useReducer, useRef } from './lib.js';
import { sessionPath, withQuery } from './api.js';
import { applyEvent, isTerminal, newActivity } from './activity.js';
import { followRun } from './sse.js';

const FLUSH_MS = 40;

const initial = {
  loading: true, error: null, session: null, path: [], runs: [], artifacts: [], version: 0, lost: false,
};

function reducer(state, action) {
  switch (action.type) {
    case 'loaded':
      return { ...state, ...action.data, loading: false, error: null, version: state.version + 1 };
    case 'failed':
      return { ...state, loading: false, error: action.error };
    case 'bump':
      return { ...state, version: state.version + 1 };
    case 'connection':
      return state.lost === action.lost ? state : { ...state, lost: action.lost };
    case 'runs':
      return { ...state, runs: action.runs, version: state.version + 1 };
    default:
      throw new Error(`unknown action ${action.type}`);
  }
}

/** The path after reading `after` from the tip: only newer nodes, or the whole path again. */
function extendPath(path, items) {
  if (!items.length) return path;
  return items[0].parent_id === null ? items : [...path, ...items];
}

function withoutReserved(metadata) {
  const { agent_config: _ignored, ...rest } = metadata || {};
  return rest;
}

export function useSession(api, sid, notify) {
  const [state, dispatch] = useReducer(reducer, initial);
  const live = useRef(new Map());
  const follows = useRef(new Map());
  const ended = useRef(new Set()); // runs whose end this page saw: never followed again
  const down = useRef(new Set()); // followed runs whose stream is down and being tried again
  const setDown = useCallback((runId, isDown) => {
    if (isDown) down.current.add(runId);
    else down.current.delete(runId);
    dispatch({ type: 'connection', lost: down.current.size > 0 });
  }, []);
  const current = useRef(state);
  current.current = state;

  const read = useCallback(async ({ wholePath = false } = {}) => {
    // Runs before the path: a run read as ended has all its nodes on the path read after it.
    const [session, runs, artifacts] = await Promise.all([
      api.get(sessionPath(sid)),
      api.get(sessionPath(sid, 'runs')),
      api.get(sessionPath(sid, 'artifacts')),
    ]);
    const held = current.current.path;
    const tip = held.length ? held[held.length - 1].node_id : null;
    let path;
    if (wholePath || !tip) {
      path = (await api.get(sessionPath(sid, 'path'))).items;
    } else {
      const answer = await api.get(withQuery(sessionPath(sid, 'path'), { after_node_id: tip }));
      path = extendPath(held, answer.items);
    }
    return { session, runs: runs.items, artifacts: artifacts.items, path };
  }, [api, sid]);

  // `follow` and `settle` call each other (a settled run may reveal the next queued one), so
  // they live in a ref that each render refreshes.
  const moves = useRef({});

  /** After a followed run ended: read again, drop its activity, follow what is still open. */
  const settle = useCallback(async (runId) => {
    const data = await read();
    live.current.delete(runId);
    dispatch({ type: 'loaded', data });
    moves.current.followOpen(data);
  }, [read]);

  const follow = useCallback((runId, userText = null) => {
    if (follows.current.has(runId) || ended.current.has(runId)) return;
    const control = new AbortController();
    follows.current.set(runId, control);
    const activity = live.current.get(runId) || newActivity(runId, { userText });
    live.current.set(runId, activity);
    let queue = [];
    let timer = null;
    const flush = () => {
      clearTimeout(timer);
      timer = null;
      let changed = false;
      for (const event of queue) changed = applyEvent(activity, event) || changed;
      queue = [];
      if (changed) dispatch({ type: 'bump' });
    };
    const onEvent = (event) => {
      queue.push(event);
      if (timer === null) timer = setTimeout(flush, FLUSH_MS);
    };
    dispatch({ type: 'bump' });
    const onConnection = (open) => setDown(runId, !open);
    followRun(api, sid, runId, { onEvent, signal: control.signal, onConnection })
      .catch((err) => notify(`The run's events stopped: ${err.message}`))
      .then(() => {
        if (control.signal.aborted) return undefined;
        flush();
        ended.current.add(runId);
        return settle(runId);
      })
      .catch((err) => notify(err.message))
      .finally(() => {
        follows.current.delete(runId);
        setDown(runId, false);
      });
  }, [api, sid, settle, notify, setDown]);

  /** Follows every main run of `data` that has not ended (each once). */
  const followOpen = useCallback((data) => {
    for (const run of data.runs) {
      if (!isTerminal(run.status) && run.agent_id === data.session.root_agent_id) follow(run.run_id);
    }
  }, [follow]);
  moves.current.followOpen = followOpen;

  const reload = useCallback(async (options) => {
    try {
      const data = await read(options);
      dispatch({ type: 'loaded', data });
      followOpen(data);
    } catch (err) {
      dispatch({ type: 'failed', error: err });
    }
  }, [read, followOpen]);

  useEffect(() => {
    reload({ wholePath: true });
    const running = follows.current;
    return () => {
      for (const control of running.values()) control.abort();
      running.clear();
    };
  }, [reload]);

  const actions = useMemo(() => ({
    reload,
    async send(text, parentNodeId = null) {
      const body = { text };
      if (parentNodeId) body.parent_node_id = parentNodeId;
      const accepted = await api.post(sessionPath(sid, 'messages'), body);
      follow(accepted.run_id, text);
      // The runs again, so the new one is listed (the Runs tab) while it is in flight.
      api.get(sessionPath(sid, 'runs'))
        .then((runs) => { if (current.current.runs.length <= runs.items.length) dispatch({ type: 'runs', runs: runs.items }); })
        .catch(() => {}); // listed at its end anyway
      const session = current.current.session;
      if (session && !session.metadata?.title) {
        const title = text.trim().split('\n')[0].slice(0, 60);
        api.patch(sessionPath(sid), { metadata: { ...withoutReserved(session.metadata), title } })
          .then(() => window.dispatchEvent(new CustomEvent('soong:sessions-changed')))
          .catch(() => {}); // a title is a convenience; the message itself was accepted
      }
      return accepted;
    },
    /** Answer the message of an answer again: its turn is posted once more under the same
     * parent (both answers stay in the tree) and becomes the active path. */
    async regenerate(nodeId) {
      const accepted = await api.post(sessionPath(sid, 'nodes', nodeId, 'regenerate'), {});
      await reload({ wholePath: true });
      follow(accepted.run_id);
      return accepted;
    },
    cancel(runId) {
      return api.post(sessionPath(sid, 'runs', runId, 'cancel'));
    },
    decide(requestId, behavior, args) { // args: approve with edited arguments
      const body = args ? { behavior, arguments: args } : { behavior };
      return api.post(sessionPath(sid, 'permissions', requestId), body);
    },
    async switchTo(nodeId) {
      await api.post(sessionPath(sid, 'switch_node'), { node_id: nodeId });
      await reload({ wholePath: true });
    },
    async setStatus(status) {
      await api.patch(sessionPath(sid), { status });
      window.dispatchEvent(new CustomEvent('soong:sessions-changed'));
      await reload();
    },
  }), [api, sid, follow, reload]);

  const activities = Array.from(live.current.values());
  return { state, activities, actions };
}
