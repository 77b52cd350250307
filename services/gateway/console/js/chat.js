// The chat view: the conversation along the active path, the live activity of runs in flight,
// and the composer (which can branch from an earlier node).

import {
  Component, html, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState,
} from './lib.js';
import { conversationItems, reuseItems, runEnding } from './conversation.js';
import { WindowedList } from './windowed.js';
import { isTerminal, phaseText, waitingPermissions } from './activity.js';
import { Blocks, Step } from './steps.js';
import { blocksText, formatDuration, formatUsage, shortId } from './format.js';

function Message({ item, ctx }) {
  const { node } = item;
  return html`<div class=${`msg ${item.kind}`} data-node-id=${node.node_id} data-role=${node.role}>
    <div class="msg-text"><${Blocks} blocks=${item.blocks} ctx=${ctx} /></div>
    <div class="msg-actions">
      ${node.role === 'user'
        // A branch goes on from an answer; a message is replaced from its parent (the API refuses
        // two user messages in a row), its text in the message box to edit.
        ? html`<button class="link" title="Send an edited message in its place, on a new branch"
            onClick=${() => ctx.branchFrom({ ...node, node_id: node.parent_id ?? 'root', replacing: true })}>Edit as new branch</button>`
        : html`<button class="link" title="Continue the conversation from this message on a new branch"
            onClick=${() => ctx.branchFrom(node)}>Branch from here</button>
          <button class="link" title="Answer the same message again, beside this answer"
            onClick=${() => ctx.regenerate(node.node_id)}>Regenerate</button>`}
      <button class="link" onClick=${() => ctx.openNode(node.node_id)}>Details</button>
    </div>
  </div>`;
}

function Ending({ run }) {
  const error = run.error;
  return html`<div class=${`ending ${run.status}`} role="status" data-run-id=${run.run_id} data-run-status=${run.status}>
    Run ${run.status}${run.end_reason && run.end_reason !== run.status ? ` (${run.end_reason})` : ''}
    ${error && html`: <code data-error-code=${error.code}>${error.code}</code> ${error.message}`}
  </div>`;
}

/** One stored item; drawn again only when it or the context changed (an unchanged item keeps
 * its object across reads, see `reuseItems`). */
class HistoryItem extends Component {
  shouldComponentUpdate(next) {
    return next.item !== this.props.item || next.ctx !== this.props.ctx;
  }

  render({ item, ctx }) {
    if (item.kind === 'user' || item.kind === 'assistant') return html`<${Message} item=${item} ctx=${ctx} />`;
    if (item.kind === 'ending') return html`<${Ending} run=${item.run} />`;
    return html`<${Step} item=${item} ctx=${ctx} />`;
  }
}

/** The stored conversation, drawn only where it is on screen; not drawn again on every
 * streamed event of a live run below it (see WindowedList). */
function History({ items, ctx, scroller, onResize }) {
  return html`<${WindowedList} items=${items} extra=${ctx} scroller=${scroller} estimate=${72}
    onResize=${onResize} render=${(item) => html`<${HistoryItem} item=${item} ctx=${ctx} />`} />`;
}

function Elapsed({ since }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return html`<span class="muted">${formatDuration(now - new Date(since).getTime())}</span>`;
}

function userTextOf(activity, run, pathNodes) {
  const placed = pathNodes.find((n) => n.run_id === activity.runId && n.role === 'user');
  const node = placed || activity.user;
  if (node) return blocksText(node.content);
  if (activity.userText) return activity.userText;
  const queued = run?.metadata?.message;
  return Array.isArray(queued) ? blocksText(queued) : '';
}

function LiveRun({ activity, run, ctx, pathNodes }) {
  const ended = activity.finished;
  const waiting = waitingPermissions(activity).length;
  const status = waiting ? 'pending' : activity.status;
  return html`<section class="live-run" data-live-run=${activity.runId} data-status=${status} aria-live="polite">
    <div class="msg user pending">${userTextOf(activity, run, pathNodes)}</div>
    <div class="live-head">
      <span class=${`status ${status}`}>${waiting ? 'waiting for permission' : status}</span>
      <span class="muted">${shortId(activity.runId)}</span>
      ${run && html`<${Elapsed} since=${run.created_at} />`}
      ${!ended && !waiting && activity.phase && html`<span class="phase" data-phase=${activity.phase.phase}>${phaseText(activity.phase)}</span>`}
      ${activity.usage && html`<span class="muted">${formatUsage(activity.usage)}</span>`}
      ${!ended && !isTerminal(activity.status) && html`<button class="danger" onClick=${() => ctx.cancel(activity.runId)}>Cancel run</button>`}
    </div>
    ${activity.items.map((item) => html`<${Step} key=${item.key} item=${item} ctx=${ctx} activity=${activity} />`)}
    ${ended && runEnding({ ...ended, run_id: activity.runId }) && html`<${Ending} run=${{ ...ended, run_id: activity.runId }} />`}
    <details class="event-log">
      <summary>events received (${activity.log.length})</summary>
      <ol>${activity.log.map((e) => html`<li key=${e.id} data-event-id=${e.id}><code>${e.id}</code> ${e.type}</li>`)}</ol>
    </details>
  </section>`;
}

function Composer({ ctx, branch, onClearBranch }) {
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const input = useRef(null);
  useEffect(() => {
    if (branch?.replacing) setText(blocksText(branch.content));
    if (branch) input.current?.focus();
  }, [branch]);
  useEffect(() => {
    // Opened with nothing focused (a session just created, whose form is gone; a reload):
    // the keyboard goes to the message box rather than to the page.
    if (!document.activeElement || document.activeElement === document.body) input.current?.focus();
  }, []);
  const submit = async (event) => {
    event?.preventDefault();
    if (!text.trim() || busy) return;
    setBusy(true);
    try {
      await ctx.send(text, branch ? branch.node_id : null);
      setText('');
      onClearBranch();
    } catch (err) {
      ctx.notify(`Not sent: ${err.message}`);
    } finally {
      setBusy(false);
      input.current?.focus();
    }
  };
  const onKey = (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) submit(event);
  };
  return html`<form class="composer" onSubmit=${submit}>
    ${branch && html`<div class="branch-note" role="status">${branch.replacing ? 'Replacing' : html`Branching from <code>${shortId(branch.node_id)}</code>`}
      “${blocksText(branch.content).slice(0, 60)}” <button type="button" class="link" onClick=${onClearBranch}>cancel</button></div>`}
    <textarea ref=${input} rows="3" aria-label="Message" placeholder="Message (Enter sends, Shift+Enter for a new line)"
      value=${text} onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey}></textarea>
    <button class="primary" type="submit" disabled=${busy || !text.trim()}>Send</button>
  </form>`;
}

/** Keeps the view scrolled to the bottom while the reader is there; the function that puts it
 * back there after drawn heights changed (a windowed list measured its items). */
function useStickToBottom(ref, version) {
  const stuck = useRef(true);
  const pinning = useRef(false);
  useEffect(() => {
    const el = ref.current;
    if (!el) return undefined;
    const onScroll = () => {
      if (pinning.current) { pinning.current = false; return; } // our own scroll
      stuck.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    };
    el.addEventListener('scroll', onScroll);
    return () => el.removeEventListener('scroll', onScroll);
  }, [ref]);
  const pin = useCallback(() => {
    const el = ref.current;
    if (!stuck.current || !el) return;
    const bottom = el.scrollHeight - el.clientHeight;
    if (Math.abs(el.scrollTop - bottom) > 1) {
      pinning.current = true;
      el.scrollTop = bottom;
    }
  }, [ref]);
  useLayoutEffect(pin, [version]);
  return pin;
}

export function Chat({ model, ctx, branch, setBranch }) {
  const { state, activities } = model;
  const scroller = useRef(null);
  const pin = useStickToBottom(scroller, state.version);
  const liveKey = activities.map((a) => a.runId).join(' ');
  const previous = useRef([]);
  const items = useMemo(() => {
    const next = reuseItems(previous.current, conversationItems(state.path, state.runs, new Set(liveKey.split(' '))));
    previous.current = next;
    return next;
  }, [state.path, state.runs, liveKey]);
  const runs = Object.fromEntries(state.runs.map((r) => [r.run_id, r]));
  return html`<div class="chat">
    <div class="conversation" ref=${scroller}>
      ${items.length === 0 && activities.length === 0 && html`<p class="empty">No messages yet. Say something below.</p>`}
      <${History} items=${items} ctx=${ctx} scroller=${scroller} onResize=${pin} />
      ${activities.map((a) => html`<${LiveRun} key=${a.runId} activity=${a} run=${runs[a.runId]} ctx=${ctx} pathNodes=${state.path} />`)}
    </div>
    <${Composer} ctx=${ctx} branch=${branch} onClearBranch=${() => setBranch(null)} />
  </div>`;
}
