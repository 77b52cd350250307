// Lays the conversation tree out in rows and lanes, like a commit graph: nodes in depth-first
// order (children by node_seq), a node's first child on its parent's lane, each further child
// on the leftmost lane that no row since its parent's uses. A pure function of the compact tree.

/**
 * `{rows, lanes}`: one row `{node, row, lane, parentRow, parentLane, onPath, active}` per node,
 * and how many lanes they use. `activeId` marks the active node; `onPath` marks it and its
 * ancestors (the active path).
 */
export function layoutTree(nodes, activeId) {
  const byId = new Map(nodes.map((n) => [n.node_id, n]));
  const children = new Map();
  const roots = [];
  for (const node of [...nodes].sort((a, b) => a.node_seq - b.node_seq)) {
    if (node.parent_id && byId.has(node.parent_id)) {
      if (!children.has(node.parent_id)) children.set(node.parent_id, []);
      children.get(node.parent_id).push(node);
    } else {
      roots.push(node);
    }
  }
  const onPath = new Set();
  for (let id = activeId; id && byId.has(id); id = byId.get(id).parent_id) onPath.add(id);

  const rows = [];
  const laneEnd = []; // the last row each lane is used at (a node, or an edge passing down)
  const freeSince = (row) => {
    let lane = 0;
    while (laneEnd[lane] !== undefined && laneEnd[lane] >= row) lane += 1;
    return lane;
  };
  // An explicit stack instead of recursion: a long conversation is a deep chain.
  const stack = [...roots].reverse().map((node) => ({ node, parent: null, first: false }));
  while (stack.length) {
    const { node, parent, first } = stack.pop();
    const row = rows.length;
    let lane;
    if (parent === null) lane = freeSince(row);
    else if (first) lane = parent.lane;
    else lane = freeSince(parent.row);
    laneEnd[lane] = row;
    const placed = {
      node,
      row,
      lane,
      parentRow: parent ? parent.row : null,
      parentLane: parent ? parent.lane : null,
      onPath: onPath.has(node.node_id),
      active: node.node_id === activeId,
    };
    rows.push(placed);
    const kids = children.get(node.node_id) || [];
    for (let i = kids.length - 1; i >= 0; i -= 1) stack.push({ node: kids[i], parent: placed, first: i === 0 });
  }
  return { rows, lanes: Math.max(1, laneEnd.length) };
}
