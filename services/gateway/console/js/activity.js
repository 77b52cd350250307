// The live activity of a run, folded from its events: the text streamed so far, tool steps with
// their permission requests and results, child runs as nested lanes, and anything else as a
// generic step, so event types this console does not know yet still show up.
//
// `applyEvent` mutates the activity it is given (the session keeps one per followed run and
// hands the view a fresh wrapper after each batch). An event id seen before is ignored, so a
// replayed or resumed stream can never show an event twice.

const TERMINAL = new Set(['completed', 'failed', 'aborted', 'cancelled']);

export function isTerminal(status) {
  return TERMINAL.has(status);
}

const PHASE_WORDS = { model: 'asking the model', streaming: 'answering', tools: 'running tools', files: 'waiting for the file store' };

/** A lane's phase as words ("running 2 tools · turn 3 of 50"), or '' before the first one. */
export function phaseText(phase) {
  if (!phase) return '';
  const what = phase.phase === 'tools' && phase.tools > 0
    ? `running ${phase.tools} tool${phase.tools === 1 ? '' : 's'}`
    : PHASE_WORDS[phase.phase] || phase.phase;
  return `${what} · turn ${phase.turn} of ${phase.maxTurns}`;
}

function newLane(runId) {
  return {
    runId,
    agentId: null,
    status: 'queued',
    attempt: 0,
    items: [],
    tools: {},
    usage: null,
    finished: null,
    phase: null,
  };
}

/** A run's activity before any event; `userText` is the message this page just sent. */
export function newActivity(runId, { userText = null } = {}) {
  return {
    ...newLane(runId),
    user: null,
    userText,
    children: {},
    log: [],
    seen: new Set(),
    taskChanges: 0,
  };
}

function laneOf(activity, runId) {
  if (!runId || runId === activity.runId) return activity;
  let lane = activity.children[runId];
  if (!lane) {
    lane = newLane(runId);
    activity.children[runId] = lane;
    activity.items.push({ kind: 'child', key: `child-${runId}`, runId });
  }
  return lane;
}

function toolOf(lane, callId, name, args) {
  let tool = lane.tools[callId];
  if (!tool) {
    tool = {
      kind: 'tool', key: `tool-${callId}`, callId, name, args: args || {},
      status: 'running', result: null, permission: null, notes: [],
    };
    lane.tools[callId] = tool;
    lane.items.push(tool);
  }
  return tool;
}

function appendText(lane, id, turn, text) {
  const last = lane.items[lane.items.length - 1];
  if (last && last.kind === 'text' && last.turn === turn) last.text += text;
  else lane.items.push({ kind: 'text', key: `text-${id}`, turn, text });
}

const HANDLERS = {
  text_delta(lane, event) {
    appendText(lane, event.id, event.data.turn, event.data.text);
  },
  tool_started(lane, { data }) {
    const tool = toolOf(lane, data.tool_call_id, data.name, data.arguments);
    tool.status = 'running';
    if (tool.permission && !tool.permission.decision) tool.permission.decision = 'allow';
  },
  tool_result(lane, { data }) {
    const tool = toolOf(lane, data.tool_call_id, data.name, null);
    tool.status = data.is_error ? 'error' : 'done';
    tool.result = data.content || [];
    if (tool.permission && !tool.permission.decision) tool.permission.decision = 'decided';
  },
  permission_requested(lane, { data }) {
    const call = data.request.tool_call;
    const tool = toolOf(lane, call.id, call.name, call.arguments);
    tool.status = 'waiting';
    tool.permission = { requestId: data.request.request_id, reason: data.request.reason, decision: null };
  },
  node_created(lane, event, activity) {
    const { node } = event.data;
    if (node.node_type !== 'message') {
      lane.items.push({ kind: 'node', key: `node-${node.node_id}`, node });
    } else if (node.role === 'user' && lane === activity) {
      activity.user = node;
    }
  },
  run_status_changed(lane, { data }) {
    if (lane.attempt > 0 && data.attempt > lane.attempt) {
      lane.items.push({ kind: 'note', key: `attempt-${data.attempt}`, text: `taken over by another worker (attempt ${data.attempt})` });
    }
    lane.status = data.status;
    lane.attempt = Math.max(lane.attempt, data.attempt || 0);
  },
  usage(lane, { data }) {
    lane.usage = data.total;
  },
  // Where the run is (asking the model, streaming its answer, running tools), turn by turn: a
  // status of the lane, not a step of its own.
  phase(lane, { data }) {
    lane.phase = { phase: data.phase, turn: data.turn, maxTurns: data.max_turns, tools: data.tools || 0 };
  },
  task_changed(lane, event, activity) {
    const { data } = event;
    activity.taskChanges += 1;
    const tool = data.tool_call_id && lane.tools[data.tool_call_id];
    const text = `task list ${data.list_name}: ${data.change}${data.task_id ? ` ${data.task_id}` : ''}`;
    if (tool) tool.notes.push(text);
    else lane.items.push({ kind: 'note', key: `note-${event.id}`, text });
  },
  error(lane, event) {
    lane.items.push({ kind: 'error', key: `error-${event.id}`, error: event.data.error, fatal: event.data.fatal });
  },
  run_finished(lane, { data }) {
    lane.finished = data;
    lane.status = data.status;
    lane.usage = data.usage || lane.usage;
  },
};

/** Folds one `{id, type, data}` event into `activity`; false when it was seen before. */
export function applyEvent(activity, event) {
  if (event.id && activity.seen.has(event.id)) return false;
  if (event.id) activity.seen.add(event.id);
  activity.log.push({ id: event.id, type: event.type, runId: event.data?.run_id || null });
  const lane = laneOf(activity, event.data?.run_id);
  if (event.data?.agent_id && !lane.agentId) lane.agentId = event.data.agent_id;
  const handler = Object.hasOwn(HANDLERS, event.type) ? HANDLERS[event.type] : null;
  if (handler) handler(lane, event, activity);
  else lane.items.push({ kind: 'event', key: `event-${event.id || activity.log.length}`, type: event.type, data: event.data });
  return true;
}

/** The permission requests of an activity that still wait for a decision. */
export function waitingPermissions(activity) {
  const lanes = [activity, ...Object.values(activity.children)];
  return lanes.flatMap((lane) => Object.values(lane.tools).filter((t) => t.permission && !t.permission.decision));
}
