// The conversation tree drawn as a graph: one row per node, branches on lanes, the active path
// highlighted. A click (or Enter) on a node shows it, with "switch here" and "branch from here".
// Drawn as a window over the rows (fixed height), so a big tree costs what the screen shows.

import {
  html, useEffect, useLayoutEffect, useMemo, useRef, useState,
} from './lib.js';
import { sessionPath } from './api.js';
import { layoutTree } from './tree_layout.js';
import { NodeDetail } from './node_detail.js';

const ROW = 30;
const LANE = 16;
const PAD = 12;

function x(lane) {
  return PAD + lane * LANE;
}

function y(row) {
  return row * ROW + ROW / 2;
}

/** Rows `[first, end)` of the window, with their edges: an edge is drawn when it crosses it. */
function Edges({ rows, first, end }) {
  return rows.filter((r) => r.parentRow !== null && r.row >= first && r.parentRow < end).map((r) => {
    const px = x(r.parentLane);
    const py = y(r.parentRow);
    const cx = x(r.lane);
    const cy = y(r.row);
    const d = px === cx ? `M${px} ${py} L${cx} ${cy}` : `M${px} ${py} C${px} ${py + ROW / 2} ${cx} ${py + ROW / 2} ${cx} ${py + ROW} L${cx} ${cy}`;
    return html`<path key=${r.node.node_id} d=${d} class=${r.onPath ? 'edge on-path' : 'edge'} />`;
  });
}

function Graph({ rows, lanes, first, end }) {
  const width = x(lanes - 1) + PAD;
  return html`<svg class="tree-graph" width=${width} height=${rows.length * ROW} aria-hidden="true">
    <${Edges} rows=${rows} first=${first} end=${end} />
    ${rows.slice(first, end).map((r) => html`<circle key=${r.node.node_id} cx=${x(r.lane)} cy=${y(r.row)} r=${r.active ? 6 : 4.5}
      class=${`dot ${r.node.role}${r.onPath ? ' on-path' : ''}${r.active ? ' active' : ''}`} />`)}
  </svg>`;
}

const OVERSCAN_ROWS = 20;

/** The rows the scroller shows (and some around them): `[first, end)`, kept in step with scrolls. */
function useRowWindow(scroller, count) {
  const [view, setView] = useState({ top: 0, height: 800 });
  useEffect(() => {
    const el = scroller.current;
    if (!el) return undefined;
    let frame = null;
    const update = () => {
      frame = null;
      setView((v) => (v.top === el.scrollTop && v.height === el.clientHeight ? v : { top: el.scrollTop, height: el.clientHeight }));
    };
    const onScroll = () => { if (frame === null) frame = requestAnimationFrame(update); };
    el.addEventListener('scroll', onScroll, { passive: true });
    const resize = new ResizeObserver(onScroll);
    resize.observe(el);
    update();
    return () => {
      el.removeEventListener('scroll', onScroll);
      resize.disconnect();
      if (frame !== null) cancelAnimationFrame(frame);
    };
  }, [scroller.current]);
  const first = Math.max(0, Math.floor(view.top / ROW) - OVERSCAN_ROWS);
  const end = Math.min(count, Math.ceil((view.top + view.height) / ROW) + OVERSCAN_ROWS);
  return [first, end];
}

const KEYS = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 };

/**
 * The tree: one Tab stop (the current row; roving tabindex), arrow keys, Page keys, Home and End
 * move between rows; Enter or a click shows a row's node. Only the rows on screen are drawn (a
 * 2,500-node session draws about sixty), the focused one always.
 */
export function TreeView({ model, ctx, selected, setSelected }) {
  const { state } = model;
  const [tree, setTree] = useState(null);
  const [error, setError] = useState(null);
  const [current, setCurrent] = useState(null); // the row index that holds the Tab stop
  const changed = `${state.session?.active_node_id}:${state.path.length}:${state.runs.length}`;
  useEffect(() => {
    ctx.api.get(sessionPath(ctx.sid, 'tree')).then(setTree, (err) => setError(err.message));
  }, [changed]);
  const laid = useMemo(() => (tree ? layoutTree(tree.nodes, tree.active_node_id) : null), [tree]);
  const list = useRef(null);
  const focusWanted = useRef(false);
  const rows = laid ? laid.rows : [];
  const activeRow = rows.findIndex((r) => r.active);
  const selectedRow = selected ? rows.findIndex((r) => r.node.node_id === selected) : -1;
  let stop = current ?? (selectedRow >= 0 ? selectedRow : activeRow);
  if (stop < 0 || stop >= rows.length) stop = 0;
  const [first, end] = useRowWindow(list, rows.length);
  const opened = useRef(false);
  useLayoutEffect(() => {
    // Opened at the active node (the newest message of the path, usually at the bottom).
    if (!laid || opened.current || !list.current) return;
    opened.current = true;
    const at = Math.max(0, stop) * ROW;
    list.current.scrollTop = Math.max(0, at - list.current.clientHeight / 2);
  }, [laid]);
  useLayoutEffect(() => {
    if (!focusWanted.current) return;
    focusWanted.current = false;
    list.current?.querySelector(`button.tree-row[data-row="${stop}"]`)?.focus();
  });
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!tree) return html`<p class="muted">Loading the tree…</p>`;
  if (!tree.nodes.length) return html`<p class="empty">The tree is empty: no message yet.</p>`;
  const { lanes } = laid;
  const indent = x(lanes - 1) + PAD + 8;
  const move = (event) => {
    let next = null;
    if (event.key in KEYS) next = stop + KEYS[event.key];
    else if (event.key === 'Home') next = 0;
    else if (event.key === 'End') next = rows.length - 1;
    if (next === null) return;
    event.preventDefault();
    next = Math.max(0, Math.min(rows.length - 1, next));
    const el = list.current;
    if (el) {
      const top = next * ROW;
      if (top < el.scrollTop) el.scrollTop = top;
      else if (top + ROW > el.scrollTop + el.clientHeight) el.scrollTop = top + ROW - el.clientHeight;
    }
    focusWanted.current = true;
    setCurrent(next);
  };
  const drawn = [];
  for (let i = first; i < end; i += 1) drawn.push(rows[i]);
  if (rows[stop] && (stop < first || stop >= end)) drawn.push(rows[stop]); // the Tab stop is always there
  return html`<div class="tree-view">
    <div class="tree" role="listbox" aria-label="Conversation tree" ref=${list} onKeyDown=${move}>
      <div class="tree-canvas" style=${{ height: `${rows.length * ROW}px` }}>
        <${Graph} rows=${rows} lanes=${lanes} first=${first} end=${end} />
        ${drawn.map((r) => html`<button key=${r.node.node_id} role="option" data-row=${r.row}
          class=${`tree-row${r.onPath ? ' on-path' : ''}${selected === r.node.node_id ? ' selected' : ''}`}
          style=${{ top: `${r.row * ROW}px`, left: `${indent}px`, height: `${ROW}px` }}
          tabindex=${r.row === stop ? '0' : '-1'} aria-selected=${selected === r.node.node_id ? 'true' : 'false'}
          aria-posinset=${r.row + 1} aria-setsize=${rows.length}
          data-node-id=${r.node.node_id} data-on-path=${r.onPath ? 'true' : 'false'}
          aria-current=${r.active ? 'true' : undefined}
          onFocus=${() => { if (r.row !== stop) setCurrent(r.row); }}
          onClick=${() => { setCurrent(r.row); setSelected(r.node.node_id); }}>
          <span class=${`role ${r.node.role}`}>${r.node.role}</span>
          ${r.node.node_type !== 'message' && html`<span class="chip">${r.node.node_type}</span>`}
          <span class="preview">${r.node.preview || '—'}</span>
          <span class="muted seq">#${r.node.node_seq}${r.active ? ' · active' : ''}</span>
        </button>`)}
      </div>
    </div>
    ${selected && html`<${NodeDetail} ctx=${ctx} nodeId=${selected} isActive=${selected === tree.active_node_id}
      onClose=${() => setSelected(null)} />`}
  </div>`;
}
