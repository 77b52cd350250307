// Checks of the console's pure modules, run inside the browser by test_console.py (the modules
// are loaded from the gateway exactly as the console loads them). One async function: it
// returns the list of failed checks, empty when all hold.
async () => {
  const failures = [];
  const check = (name, ok, detail = '') => { if (!ok) failures.push(`${name} ${detail}`); };
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  const { SseParser, toEvent } = await import('/console/js/sse.js');
  // Frames split at every possible point, CRLF split across chunks, comments, multi-line data.
  const stream = 'retry: 1000\r\n\r\n: keep-alive\r\nid: 1-0\r\nevent: text_delta\r\ndata: {"type":"text_delta","text":"a"}\r\n\r\n'
    + 'id: 1-1\nevent: x\ndata: line one\ndata: line two\n\nid: 2-0\rdata: {"v":1}\r\r';
  for (let cut = 0; cut <= stream.length; cut += 1) {
    const parser = new SseParser();
    const frames = [...parser.feed(stream.slice(0, cut)), ...parser.feed(stream.slice(cut))];
    const ok = same(frames.map((f) => [f.id, f.event, f.data]), [
      ['1-0', 'text_delta', '{"type":"text_delta","text":"a"}'],
      ['1-1', 'x', 'line one\nline two'],
      ['2-0', 'message', '{"v":1}'],
    ]);
    check('sse frames', ok, `cut at ${cut}`);
    check('sse retry', parser.retryMs === 1000, `cut at ${cut}`);
  }
  const byChar = new SseParser();
  const oneByOne = [...stream].flatMap((c) => byChar.feed(c));
  check('sse char by char', oneByOne.length === 3);
  check('sse typed event', toEvent({ id: '9-0', event: 'timeline', data: '{"event_type":"run_started"}' }).type === 'timeline');

  // A stream cut in the middle of a frame: the next request resumes after the last whole event.
  const { followRun } = await import('/console/js/sse.js');
  const { ApiError } = await import('/console/js/api.js');
  const bodies = [
    'id: 1-0\nevent: text_delta\ndata: {"type":"text_delta","run_id":"r","turn":0,"text":"a"}\n\nid: 1-1\ndata: {"type":"te',
    ': keep-alive\n\nid: 1-1\ndata: {"type":"text_delta","run_id":"r","turn":0,"text":"b"}\n\n'
      + 'id: 1-2\ndata: {"type":"run_finished","run_id":"other","status":"completed"}\n\n'
      + 'id: 2-0\ndata: {"type":"run_finished","run_id":"r","status":"completed"}\n\nid: 9-9\ndata: {}\n\n',
  ];
  const asked = [];
  const fakeApi = {
    async fetch(method, url, { headers }) {
      asked.push(headers['Last-Event-ID'] || '');
      return new Response(bodies[asked.length - 1]);
    },
  };
  const followed = [];
  await followRun(fakeApi, 'sess_x', 'r', { onEvent: (e) => followed.push(e.id) });
  check('resume with Last-Event-ID', same(asked, ['', '1-0']), JSON.stringify(asked));
  check('resumed events once, up to the end', same(followed, ['1-0', '1-1', '1-2', '2-0']), JSON.stringify(followed));
  const gone = { async fetch() { throw new ApiError(404, 'not_found', 'no such run'); } };
  const refused = await followRun(gone, 'sess_x', 'r', { onEvent: () => {} }).then(() => null, (err) => err.code);
  check('a refusal is not retried', refused === 'not_found');

  const { newActivity, applyEvent, waitingPermissions } = await import('/console/js/activity.js');
  const run = 'run_a';
  const events = [
    { id: '1-0', type: 'run_status_changed', data: { run_id: run, status: 'running', attempt: 1 } },
    { id: '1-1', type: 'text_delta', data: { run_id: run, turn: 0, text: 'Hel' } },
    { id: '1-2', type: 'text_delta', data: { run_id: run, turn: 0, text: 'lo' } },
    { id: '1-3', type: 'permission_requested', data: { run_id: run, request: { request_id: 'perm_c1', reason: 'r', tool_call: { id: 'c1', name: 'write_file', arguments: { path: 'output/a' } } } } },
    { id: '1-4', type: 'text_delta', data: { run_id: 'run_child', agent_id: 'agent_w', turn: 0, text: 'child says' } },
    { id: '1-5', type: 'model_phase', data: { run_id: run, phase: 'waiting' } },
  ];
  const activity = newActivity(run);
  for (const e of [...events, ...events]) applyEvent(activity, e); // the second pass is all repeats
  check('activity dedupe', activity.log.length === events.length, String(activity.log.length));
  check('activity text', activity.items[0].kind === 'text' && activity.items[0].text === 'Hello', JSON.stringify(activity.items[0]));
  check('activity waiting', waitingPermissions(activity).length === 1);
  check('activity child lane', activity.children.run_child?.items[0]?.text === 'child says');
  check('activity unknown type shown', activity.items.some((i) => i.kind === 'event' && i.type === 'model_phase'));
  applyEvent(activity, { id: '1-6', type: 'tool_started', data: { run_id: run, tool_call_id: 'c1', name: 'write_file', arguments: {} } });
  applyEvent(activity, { id: '1-7', type: 'tool_result', data: { run_id: run, tool_call_id: 'c1', name: 'write_file', content: [{ type: 'text', text: 'ok' }] } });
  check('activity permission resolved', waitingPermissions(activity).length === 0);
  check('activity one tool step', activity.items.filter((i) => i.kind === 'tool').length === 1);
  const steps = activity.items.length;
  applyEvent(activity, { id: '1-7b', type: 'phase', data: { run_id: run, phase: 'tools', turn: 2, max_turns: 50, tools: 2 } });
  check('activity phase is a status, not a step', activity.items.length === steps && activity.phase.turn === 2);
  const { phaseText } = await import('/console/js/activity.js');
  check('activity phase text', phaseText(activity.phase) === 'running 2 tools · turn 2 of 50', phaseText(activity.phase));
  applyEvent(activity, { id: '1-8', type: 'run_finished', data: { run_id: run, status: 'failed', error: { code: 'x' } } });
  check('activity finished', activity.status === 'failed' && activity.finished.error.code === 'x');

  const { layoutTree } = await import('/console/js/tree_layout.js');
  const node = (id, parent, seq) => ({ node_id: id, parent_id: parent, node_seq: seq, role: 'user', node_type: 'message', preview: id });
  // a → b → c, a → d (a branch), b → e (another), d → f
  const { rows, lanes } = layoutTree(
    [node('a', null, 1), node('b', 'a', 2), node('c', 'b', 3), node('d', 'a', 4), node('e', 'b', 5), node('f', 'd', 6)], 'f',
  );
  check('tree order', same(rows.map((r) => r.node.node_id), ['a', 'b', 'c', 'e', 'd', 'f']), JSON.stringify(rows.map((r) => r.node.node_id)));
  check('tree lanes', same(rows.map((r) => r.lane), [0, 0, 0, 1, 2, 2]), JSON.stringify(rows.map((r) => r.lane)));
  check('tree lane count', lanes === 3);
  check('tree active path', same(rows.filter((r) => r.onPath).map((r) => r.node.node_id), ['a', 'd', 'f']));
  const chain = Array.from({ length: 5000 }, (_, i) => node(`n${i}`, i ? `n${i - 1}` : null, i));
  check('tree deep chain', layoutTree(chain, 'n4999').rows.length === 5000);

  const { parseCsv } = await import('/console/js/csv.js');
  check('csv quotes', same(parseCsv('a,"b,""c"""\r\n1,"x\ny"\n'), [['a', 'b,"c"'], ['1', 'x\ny']]), JSON.stringify(parseCsv('a,"b,""c"""\r\n1,"x\ny"\n')));
  check('csv cap', parseCsv('1\n2\n3\n', { maxRows: 2 }).length === 2);
  check('csv tab', same(parseCsv('a\tb', { delimiter: '\t' }), [['a', 'b']]));

  const { conversationItems } = await import('/console/js/conversation.js');
  const path = [
    { node_id: 'n1', run_id: 'r1', role: 'user', node_type: 'message', content: [{ type: 'text', text: 'hi' }] },
    { node_id: 'n2', run_id: 'r1', role: 'assistant', node_type: 'message', content: [{ type: 'tool_call', id: 'c9', name: 'lookup', arguments: {} }] },
    { node_id: 'n3', run_id: 'r1', role: 'tool', node_type: 'message', content: [{ type: 'tool_result', tool_call_id: 'c9', content: [], is_error: true }] },
    { node_id: 'n4', run_id: 'r2', role: 'user', node_type: 'message', content: [{ type: 'text', text: 'again' }] },
  ];
  const items = conversationItems(path, [{ run_id: 'r1', status: 'failed', end_reason: 'failed', error: { code: 'e' } }], new Set(['r2']));
  check('conversation kinds', same(items.map((i) => i.kind), ['user', 'tool', 'ending']), JSON.stringify(items.map((i) => i.kind)));
  check('conversation tool result', items[1].status === 'error');

  const { endpointsOf } = await import('/console/js/assistants.js');
  const { parseRoute } = await import('/console/js/route.js');
  check('assistants route', parseRoute('#/assistants').view === 'assistants');
  check('assistant endpoints', same(endpointsOf('https://gw.example:8443/', 'code.review-2'), {
    mcp: 'https://gw.example:8443/mcp',
    openai: 'https://gw.example:8443/v1/openai',
    a2aCard: 'https://gw.example:8443/a2a/code.review-2/.well-known/agent-card.json',
  }), JSON.stringify(endpointsOf('https://gw.example:8443/', 'code.review-2')));
  return failures;
}
