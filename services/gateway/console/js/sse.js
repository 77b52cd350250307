// A run's event stream over fetch. EventSource cannot send an Authorization header, so the
// stream is read with fetch and parsed here (the WHATWG event-stream format), and a dropped
// connection is resumed with Last-Event-ID: the client sees every event once, in order.

import { ApiError, sessionPath } from './api.js';

/** Parses event-stream text fed in arbitrary chunks into `{id, event, data}` frames. */
export class SseParser {
  constructor() {
    this.buffer = '';
    this.data = [];
    this.event = '';
    this.lastEventId = '';
    this.retryMs = null;
    this.pendingCR = false;
  }

  /** The frames completed by `text` (a chunk may end anywhere, even inside a CRLF). */
  feed(text) {
    const frames = [];
    let start = 0;
    if (this.pendingCR && text.startsWith('\n')) start = 1; // the LF of a CRLF split across chunks
    this.pendingCR = false;
    const chunk = this.buffer + text.slice(start);
    let lineStart = 0;
    for (let i = 0; i < chunk.length; i += 1) {
      const c = chunk[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(chunk.slice(lineStart, i), frames);
      if (c === '\r') {
        if (i + 1 === chunk.length) this.pendingCR = true;
        else if (chunk[i + 1] === '\n') i += 1;
      }
      lineStart = i + 1;
    }
    this.buffer = chunk.slice(lineStart);
    return frames;
  }

  line(line, frames) {
    if (line === '') {
      if (this.data.length) {
        frames.push({ id: this.lastEventId, event: this.event || 'message', data: this.data.join('\n') });
      }
      this.data = [];
      this.event = '';
      return;
    }
    if (line.startsWith(':')) return; // a comment (keep-alive)
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}

/** One parsed event: its stream id, its type and its JSON payload. */
export function toEvent(frame) {
  const data = JSON.parse(frame.data);
  const type = (data && typeof data.type === 'string') ? data.type : frame.event;
  return { id: frame.id, type, data };
}

/** A pause that ends early when `signal` aborts or the browser comes back online (the network
 * is back: try now rather than after a pause grown long while it was away). */
const sleep = (ms, signal) => new Promise((resolve) => {
  const done = () => {
    clearTimeout(timer);
    window.removeEventListener('online', done);
    resolve();
  };
  const timer = setTimeout(done, ms);
  window.addEventListener('online', done);
  signal?.addEventListener('abort', done, { once: true });
});

/**
 * Follows run `runId` until its `run_finished`, calling `onEvent` once per event in order.
 *
 * Starts after `lastEventId` (from the start when empty); reconnects with Last-Event-ID after a
 * dropped connection, with a growing pause; stops quietly when `signal` aborts. Refusals that
 * another try cannot fix (404, 401, 400) are thrown. `onConnection(true)` is called each time
 * the stream is open, `onConnection(false)` each time it dropped and is being tried again.
 */
export async function followRun(api, sessionId, runId, {
  lastEventId = '', onEvent, signal, onConnection = () => {},
} = {}) {
  const url = `${sessionPath(sessionId, 'runs', runId, 'events')}?keepalive_s=10`;
  let last = lastEventId;
  let pause = 500;
  while (!signal?.aborted) {
    const parser = new SseParser();
    let finished = false;
    try {
      const headers = last ? { 'Last-Event-ID': last } : {};
      const response = await api.fetch('GET', url, { headers, signal });
      pause = 500;
      onConnection(true);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const frame of parser.feed(value)) {
          const event = toEvent(frame);
          last = frame.id || last;
          onEvent(event);
          if (event.type === 'run_finished' && event.data.run_id === runId) {
            finished = true; // nothing after the run's own end belongs to it
            break;
          }
        }
        if (finished) {
          reader.cancel().catch(() => {});
          return;
        }
      }
    } catch (err) {
      if (signal?.aborted || err.name === 'AbortError') return;
      if (err instanceof ApiError && [400, 401, 403, 404].includes(err.status)) throw err;
      const retryAfter = Number(err.details?.retry_after_s || 0) * 1000;
      pause = Math.max(pause, retryAfter);
    }
    // The stream closed without the run's end (a restart, a proxy): come back after a pause.
    if (!signal?.aborted) onConnection(false);
    await sleep(Math.max(pause, parser.retryMs || 0), signal);
    pause = Math.min(pause * 2, 8000);
  }
}
