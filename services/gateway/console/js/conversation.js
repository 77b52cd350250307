// The conversation along the active path, as display items: messages, tool steps with their
// results, child results, compactions and injected context as steps, and how each run ended
// when it did not complete. A pure function of the path's nodes and the session's runs.

import { blocksText } from './format.js';

function toolResults(nodes) {
  const results = {};
  for (const node of nodes) {
    for (const block of node.content) {
      if (block.type === 'tool_result') results[block.tool_call_id] = { block, node };
    }
  }
  return results;
}

function messageItems(node, results) {
  const items = [];
  const text = node.content.filter((b) => b.type !== 'tool_call' && b.type !== 'tool_result');
  if (text.length || node.role === 'user') {
    items.push({ kind: node.role === 'user' ? 'user' : 'assistant', key: node.node_id, node, text: blocksText(text), blocks: text });
  }
  for (const block of node.content) {
    if (block.type !== 'tool_call') continue;
    const found = results[block.id];
    items.push({
      kind: 'tool',
      key: `tool-${block.id}`,
      callId: block.id,
      name: block.name,
      args: block.arguments,
      status: !found ? 'no result' : (found.block.is_error ? 'error' : 'done'),
      result: found ? found.block.content : null,
      resultNode: found ? found.node : null,
      node,
      permission: null,
      notes: [],
    });
  }
  return items;
}

/** How a run ended, when that is worth a line in the conversation (not a plain completion). */
export function runEnding(run) {
  if (!run || (run.status === 'completed' && run.end_reason === 'completed')) return null;
  if (!['completed', 'failed', 'aborted', 'cancelled'].includes(run.status)) return null;
  return { kind: 'ending', key: `ending-${run.run_id}`, run };
}

/**
 * Display items of `nodes` (root first), leaving out nodes of the runs in `skipRuns` (shown live
 * instead), with each listed run's ending after its last node on the path.
 */
export function conversationItems(nodes, runs = [], skipRuns = new Set()) {
  const shown = nodes.filter((n) => !n.run_id || !skipRuns.has(n.run_id));
  const results = toolResults(shown);
  const lastOfRun = {};
  shown.forEach((n, i) => { if (n.run_id) lastOfRun[n.run_id] = i; });
  const endings = {};
  for (const run of runs) {
    const ending = runEnding(run);
    if (ending && lastOfRun[run.run_id] !== undefined) endings[lastOfRun[run.run_id]] = ending;
  }
  const items = [];
  shown.forEach((node, i) => {
    if (node.node_type === 'message' && node.role !== 'tool') items.push(...messageItems(node, results));
    else if (node.node_type !== 'message') items.push({ kind: 'node', key: `node-${node.node_id}`, node });
    else if (node.content.some((b) => b.type !== 'tool_result')) {
      items.push({ kind: 'node', key: `node-${node.node_id}`, node });
    }
    if (endings[i]) items.push(endings[i]);
  });
  return items;
}

function sameItem(a, b) {
  if (a.kind !== b.kind || a.node !== b.node) return false;
  if (a.kind === 'tool') return a.resultNode === b.resultNode && a.status === b.status;
  if (a.kind === 'ending') {
    return a.run.status === b.run.status && a.run.end_reason === b.run.end_reason
      && a.run.error?.code === b.run.error?.code;
  }
  return true;
}

/**
 * `next` with each item that did not change since `previous` (same key, same node, same
 * result) replaced by its previous object, so a view drawing items by identity draws only the
 * new and changed ones. The path keeps its node objects across reads (only newer nodes are
 * read), which is what makes this cheap.
 */
export function reuseItems(previous, next) {
  if (!previous.length) return next;
  const byKey = new Map(previous.map((item) => [item.key, item]));
  let changed = previous.length !== next.length;
  const out = next.map((item, i) => {
    const old = byKey.get(item.key);
    const kept = old && sameItem(old, item) ? old : item;
    if (kept !== previous[i]) changed = true;
    return kept;
  });
  return changed ? out : previous;
}
