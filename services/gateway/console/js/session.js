// One session: its header (title, id, archive), its tabs (chat, tree, runs, files, tasks), and
// the context every view of it shares (the API, the session id, the moves on its tree).

import { html, useMemo, useState } from './lib.js';
import { useSession } from './session_state.js';
import { TABS, sessionHref } from './route.js';
import { Chat } from './chat.js';
import { TreeView } from './tree.js';
import { Timeline } from './timeline.js';
import { Files } from './files.js';
import { Tasks } from './tasks.js';
import { NodeDetail } from './node_detail.js';
import { Overlay } from './overlay.js';
import { sessionTitle } from './format.js';
import { SessionActions } from './session_actions.js';
import { Agents } from './agents.js';
import { Trace } from './trace.js';

const TAB_LABELS = {
  chat: 'Chat', tree: 'Tree', runs: 'Runs', files: 'Files', tasks: 'Tasks', agents: 'Agents', trace: 'Trace',
};

function Tabs({ sid, tab }) {
  const onKey = (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    const next = TABS[(TABS.indexOf(tab) + step + TABS.length) % TABS.length];
    location.hash = sessionHref(sid, next);
    setTimeout(() => document.querySelector(`[data-tab="${next}"]`)?.focus(), 0);
  };
  return html`<div class="tabs" role="tablist" aria-label="Session views" onKeyDown=${onKey}>
    ${TABS.map((t) => html`<a key=${t} role="tab" data-tab=${t} href=${sessionHref(sid, t)}
      aria-selected=${t === tab ? 'true' : 'false'} tabindex=${t === tab ? '0' : '-1'}
      class=${t === tab ? 'tab active' : 'tab'}>${TAB_LABELS[t]}</a>`)}
  </div>`;
}

function Header({ model, api, notify }) {
  const { session } = model.state;
  const archived = session.status === 'archived';
  const toggle = () => model.actions.setStatus(archived ? 'active' : 'archived');
  return html`<header class="session-head">
    <div>
      <h2>${sessionTitle(session) || 'Untitled session'}</h2>
      <code class="muted" data-session-id=${session.session_id}>${session.session_id}</code>
      ${archived && html` <span class="chip">archived</span>`}
    </div>
    <div class="row"><button onClick=${toggle}>${archived ? 'Unarchive' : 'Archive'}</button>
      <${SessionActions} api=${api} sid=${session.session_id} notify=${notify} /></div>
  </header>`;
}

export function SessionView({ api, sid, tab, notify }) {
  const model = useSession(api, sid, notify);
  const [branch, setBranch] = useState(null);
  const [openNode, setOpenNode] = useState(null);
  const [selected, setSelected] = useState(null);
  const { state, actions } = model;

  const ctx = useMemo(() => ({
    api,
    sid,
    notify,
    send: actions.send,
    decide: actions.decide,
    cancel: (runId) => actions.cancel(runId).catch((err) => notify(`Not cancelled: ${err.message}`)),
    switchTo: (nodeId) => actions.switchTo(nodeId).then(() => notify('Switched: the next message continues from there.'),
      (err) => notify(err.message)),
    branchFrom: (node) => {
      setBranch(node);
      setOpenNode(null);
      location.hash = sessionHref(sid, 'chat');
    },
    regenerate: (nodeId) => {
      setBranch(null);
      actions.regenerate(nodeId).catch((err) => notify(`Not regenerated: ${err.message}`));
    },
    openNode: (nodeId) => setOpenNode(nodeId),
    showToolCall: (callId, nodeId) => {
      location.hash = sessionHref(sid, 'chat');
      setTimeout(() => {
        const step = document.querySelector(`[data-tool-call-id="${CSS.escape(callId)}"]`);
        if (step) {
          step.querySelector('details')?.setAttribute('open', '');
          step.scrollIntoView({ block: 'center' });
          step.classList.add('flash');
          setTimeout(() => step.classList.remove('flash'), 1500);
        } else if (nodeId) {
          setOpenNode(nodeId); // made on another branch: show its node
        }
      }, 50);
    },
  }), [api, sid, notify, actions]);

  const viewCtx = useMemo(() => {
    const artifactsByCall = {};
    for (const a of state.artifacts) {
      if (a.tool_call_id) (artifactsByCall[a.tool_call_id] ||= []).push(a);
    }
    // Child runs by the tool call that started them: the conversation keeps showing them.
    const childRunsByCall = {};
    for (const r of state.runs) {
      const callId = r.metadata?.kind === 'child' && r.metadata.tool_call_id;
      if (callId) (childRunsByCall[callId] ||= []).push(r);
    }
    return { ...ctx, artifactsByCall, childRunsByCall };
  }, [ctx, state.artifacts, state.runs]);

  if (state.error) {
    return html`<div class="session"><p class="error-text" role="alert">${state.error.status === 404 ? 'No such session.' : state.error.message}</p></div>`;
  }
  if (!state.session) return html`<div class="session"><p class="muted">Loading…</p></div>`;
  let body;
  if (tab === 'tree') body = html`<${TreeView} model=${model} ctx=${viewCtx} selected=${selected} setSelected=${setSelected} />`;
  else if (tab === 'runs') body = html`<${Timeline} model=${model} ctx=${viewCtx} />`;
  else if (tab === 'files') body = html`<${Files} model=${model} ctx=${viewCtx} />`;
  else if (tab === 'tasks') body = html`<${Tasks} model=${model} ctx=${viewCtx} />`;
  else if (tab === 'agents') body = html`<${Agents} model=${model} ctx=${viewCtx} />`;
  else if (tab === 'trace') body = html`<${Trace} model=${model} ctx=${viewCtx} />`;
  else body = html`<${Chat} model=${model} ctx=${viewCtx} branch=${branch} setBranch=${setBranch} />`;
  return html`<div class="session" data-session=${sid}>
    <${Header} model=${model} api=${api} notify=${notify} />
    ${state.lost && html`<p class="connection-lost" role="status" data-connection="lost">
      Connection lost: reconnecting… (nothing is missed: the stream resumes where it stopped)</p>`}
    <${Tabs} sid=${sid} tab=${tab} />
    <div class="tab-body" role="tabpanel">${body}</div>
    ${openNode && html`<${Overlay} key=${openNode} label="Node details" onClose=${() => setOpenNode(null)}>
      <${NodeDetail} ctx=${viewCtx} nodeId=${openNode} isActive=${openNode === state.session.active_node_id}
        onClose=${() => setOpenNode(null)} /></${Overlay}>`}
  </div>`;
}
