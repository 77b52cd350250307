// The conversation tree drawn as a graph: one row per node, branches on lanes, the active path
// highlighted. A click (or Enter) on a node shows it, with "switch here" and "branch from here".

import { html, useEffect, useRef, useState } from './lib.js';
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

function Edges({ rows }) {
  return rows.filter((r) => r.parentRow !== null).map((r) => {
    const px = x(r.parentLane);
    const py = y(r.parentRow);
    const cx = x(r.lane);
    const cy = y(r.row);
    const d = px === cx ? `M${px} ${py} L${cx} ${cy}` : `M${px} ${py} C${px} ${py + ROW / 2} ${cx} ${py + ROW / 2} ${cx} ${py + ROW} L${cx} ${cy}`;
    return html`<path key=${r.node.node_id} d=${d} class=${r.onPath ? 'edge on-path' : 'edge'} />`;
  });
}

function Graph({ rows, lanes }) {
  const width = x(lanes - 1) + PAD;
  return html`<svg class="tree-graph" width=${width} height=${rows.length * ROW} aria-hidden="true">
    <${Edges} rows=${rows} />
    ${rows.map((r) => html`<circle key=${r.node.node_id} cx=${x(r.lane)} cy=${y(r.row)} r=${r.active ? 6 : 4.5}
      class=${`dot ${r.node.role}${r.onPath ? ' on-path' : ''}${r.active ? ' active' : ''}`} />`)}
  </svg>`;
}

function moveFocus(event) {
  const keys = { ArrowDown: 1, ArrowUp: -1 };
  if (!(event.key in keys) && event.key !== 'Home' && event.key !== 'End') return;
  const buttons = [...event.currentTarget.querySelectorAll('button.tree-row')];
  const at = buttons.indexOf(document.activeElement);
  let next = at + (keys[event.key] || 0);
  if (event.key === 'Home') next = 0;
  if (event.key === 'End') next = buttons.length - 1;
  if (buttons[next]) {
    event.preventDefault();
    buttons[next].focus();
  }
}

export function TreeView({ model, ctx, selected, setSelected }) {
  const { state } = model;
  const [tree, setTree] = useState(null);
  const [error, setError] = useState(null);
  const changed = `${state.session?.active_node_id}:${state.path.length}:${state.runs.length}`;
  useEffect(() => {
    ctx.api.get(sessionPath(ctx.sid, 'tree')).then(setTree, (err) => setError(err.message));
  }, [changed]);
  const list = useRef(null);
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!tree) return html`<p class="muted">Loading the tree…</p>`;
  if (!tree.nodes.length) return html`<p class="empty">The tree is empty: no message yet.</p>`;
  const { rows, lanes } = layoutTree(tree.nodes, tree.active_node_id);
  const indent = x(lanes - 1) + PAD + 8;
  return html`<div class="tree-view">
    <div class="tree" role="list" aria-label="Conversation tree" ref=${list} onKeyDown=${moveFocus}>
      <${Graph} rows=${rows} lanes=${lanes} />
      ${rows.map((r) => html`<div role="listitem" key=${r.node.node_id} class="tree-item" style=${{ height: `${ROW}px`, paddingLeft: `${indent}px` }}>
        <button class=${`tree-row${r.onPath ? ' on-path' : ''}${selected === r.node.node_id ? ' selected' : ''}`}
          data-node-id=${r.node.node_id} data-on-path=${r.onPath ? 'true' : 'false'}
          aria-current=${r.active ? 'true' : undefined}
          onClick=${() => setSelected(r.node.node_id)}>
          <span class=${`role ${r.node.role}`}>${r.node.role}</span>
          ${r.node.node_type !== 'message' && html`<span class="chip">${r.node.node_type}</span>`}
          <span class="preview">${r.node.preview || '—'}</span>
          <span class="muted seq">#${r.node.node_seq}${r.active ? ' · active' : ''}</span>
        </button>
      </div>`)}
    </div>
    ${selected && html`<${NodeDetail} ctx=${ctx} nodeId=${selected} isActive=${selected === tree.active_node_id}
      onClose=${() => setSelected(null)} />`}
  </div>`;
}

