// Small formatting helpers shared by the views (pure functions).

/** The distinctive tail of a prefixed id: `run_0123456789abcdef` → `run_…89abcdef`. */
export function shortId(id) {
  if (!id) return '';
  const cut = id.lastIndexOf('_');
  const tail = id.slice(cut + 1);
  return tail.length > 8 ? `${id.slice(0, cut + 1)}…${tail.slice(-8)}` : id;
}

export function formatBytes(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** Milliseconds as `850 ms`, `4.2 s`, `3 min 5 s`. */
export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return d.toLocaleString(undefined, {
    month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}

/** `12 in · 34 out` (plus cache figures when there are any). */
export function formatUsage(usage) {
  if (!usage) return '';
  const parts = [`${usage.input_tokens || 0} in`, `${usage.output_tokens || 0} out`];
  if (usage.cache_read_tokens) parts.push(`${usage.cache_read_tokens} cache read`);
  if (usage.cache_write_tokens) parts.push(`${usage.cache_write_tokens} cache write`);
  return `${parts.join(' · ')} tokens`;
}

/** The text of content blocks (text blocks joined; other blocks named). */
export function blocksText(blocks) {
  return (blocks || []).map((b) => {
    if (b.type === 'text') return b.text;
    if (b.type === 'json') return b.summary || JSON.stringify(b.data);
    if (b.type === 'artifact_ref') return `[artifact ${b.filename || b.artifact_id}]`;
    if (b.type === 'attachment') return `[attachment ${b.path}]`;
    if (b.type === 'tool_call') return `[tool call ${b.name}]`;
    if (b.type === 'tool_result') return blocksText(b.content);
    return `[${b.type}]`;
  }).join('\n');
}

export function prettyJson(value) {
  return JSON.stringify(value, null, 2);
}

/** The session's title from its metadata, or null. */
export function sessionTitle(session) {
  const title = session?.metadata?.title;
  return typeof title === 'string' && title.trim() ? title.trim() : null;
}
