// The file panel: the session's input, scratchpad and output folders (browse, preview text, CSV
// and images, download), uploads into input/ (drag and drop, or a file picker), and the
// session's artifacts, each linked to the tool call that made it.

import { html, useEffect, useRef, useState } from './lib.js';
import { filePath, sessionPath, withQuery } from './api.js';
import { fetchBlob, saveAs } from './download.js';
import { parseCsv } from './csv.js';
import { formatBytes, formatTime, shortId } from './format.js';

const AREAS = ['input', 'scratchpad', 'output'];
const PREVIEW_MAX_BYTES = 2 * 1024 * 1024;
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|svg)$/i;
const TABLE = /\.(csv|tsv)$/i;

function fileUrl(sid, path) {
  return `${sessionPath(sid, 'files')}/${filePath(path)}`;
}

function CsvTable({ text, tab }) {
  const rows = parseCsv(text, { delimiter: tab ? '\t' : ',' });
  if (!rows.length) return html`<p class="muted">empty</p>`;
  const [head, ...body] = rows;
  return html`<div class="table-wrap"><table class="csv" data-preview="table">
    <thead><tr>${head.map((c, i) => html`<th key=${i}>${c}</th>`)}</tr></thead>
    <tbody>${body.map((r, i) => html`<tr key=${i}>${r.map((c, j) => html`<td key=${j}>${c}</td>`)}</tr>`)}</tbody>
  </table></div>`;
}

function Preview({ ctx, entry }) {
  const [view, setView] = useState({ loading: true });
  useEffect(() => {
    let url = null;
    setView({ loading: true });
    if (entry.size_bytes > PREVIEW_MAX_BYTES) {
      setView({ note: `${formatBytes(entry.size_bytes)}: too large to preview, download it instead.` });
      return undefined;
    }
    fetchBlob(ctx.api, fileUrl(ctx.sid, entry.path)).then(async (blob) => {
      if (IMAGE.test(entry.path)) {
        url = URL.createObjectURL(blob);
        setView({ image: url });
        return;
      }
      const text = await blob.text();
      if (text.includes('\0')) setView({ note: 'A binary file: download it to open it.' });
      else setView({ text, table: TABLE.test(entry.path), tab: /\.tsv$/i.test(entry.path) });
    }, (err) => setView({ note: err.message }));
    return () => { if (url) URL.revokeObjectURL(url); };
  }, [entry.path, entry.modified_at]);
  let body;
  if (view.loading) body = html`<p class="muted">Loading…</p>`;
  else if (view.note) body = html`<p class="muted">${view.note}</p>`;
  else if (view.image) body = html`<img src=${view.image} alt=${entry.path} data-preview="image" />`;
  else if (view.table) body = html`<${CsvTable} text=${view.text} tab=${view.tab} />`;
  else body = html`<pre class="text" data-preview="text">${view.text}</pre>`;
  return html`<section class="file-preview" aria-label=${`Preview of ${entry.path}`}>
    <header><h3>${entry.path}</h3>
      <button onClick=${() => saveAs(ctx.api, fileUrl(ctx.sid, entry.path), entry.path.split('/').pop()).catch((e) => ctx.notify(e.message))}>Download</button>
    </header>
    ${body}
  </section>`;
}

function Uploader({ ctx, onUploaded }) {
  const [dragging, setDragging] = useState(false);
  const [status, setStatus] = useState([]);
  const picker = useRef(null);
  const upload = async (files) => {
    for (const file of files) {
      setStatus((s) => [...s, `uploading ${file.name}…`]);
      try {
        const url = sessionPath(ctx.sid, 'files', 'input', file.name);
        await ctx.api.fetch('PUT', url, { body: file, headers: { 'Content-Type': 'application/octet-stream' } });
        setStatus((s) => [...s, `uploaded input/${file.name}`]);
      } catch (err) {
        setStatus((s) => [...s, `${file.name}: ${err.message}`]);
      }
    }
    onUploaded();
  };
  const onDrop = (event) => {
    event.preventDefault();
    setDragging(false);
    upload([...event.dataTransfer.files]);
  };
  const onDragOver = (event) => {
    event.preventDefault();
    setDragging(true);
  };
  return html`<div class=${`dropzone${dragging ? ' dragging' : ''}`} data-dropzone
    onDragOver=${onDragOver} onDragLeave=${() => setDragging(false)} onDrop=${onDrop}>
    <p>Drop files here to upload them to <code>input/</code>, or
      <button type="button" onClick=${() => picker.current.click()}>choose files</button></p>
    <input ref=${picker} type="file" multiple class="visually-hidden" tabindex="-1" aria-hidden="true"
      data-file-picker onChange=${(e) => { upload([...e.target.files]); e.target.value = ''; }} />
    ${status.length > 0 && html`<ul class="upload-status" role="status">${status.slice(-4).map((s, i) => html`<li key=${i}>${s}</li>`)}</ul>`}
  </div>`;
}

function Artifacts({ ctx, artifacts }) {
  if (!artifacts.length) return html`<p class="muted">No artifacts yet.</p>`;
  return html`<table class="files artifacts">
    <thead><tr><th>artifact</th><th>size</th><th>made by</th><th></th></tr></thead>
    <tbody>${artifacts.map((a) => html`<tr key=${a.artifact_id} data-artifact-id=${a.artifact_id}>
      <td><span title=${a.artifact_id}>${a.filename || a.path}</span>${a.summary && html`<div class="muted">${a.summary}</div>`}</td>
      <td>${formatBytes(a.size_bytes)}</td>
      <td>${a.tool_call_id ? html`<button class="link" data-made-by=${a.tool_call_id}
        onClick=${() => ctx.showToolCall(a.tool_call_id, a.node_id)}>tool call ${shortId(a.tool_call_id)}</button>` : '—'}</td>
      <td><button onClick=${() => saveAs(ctx.api, sessionPath(ctx.sid, 'artifacts', a.artifact_id, 'content'), a.filename || a.path.split('/').pop()).catch((e) => ctx.notify(e.message))}>Download</button></td>
    </tr>`)}</tbody>
  </table>`;
}

export function Files({ model, ctx }) {
  const { state } = model;
  const [area, setArea] = useState('output');
  const [items, setItems] = useState(null);
  const [selected, setSelected] = useState(null);
  const [error, setError] = useState(null);
  const [reloads, setReloads] = useState(0);
  const runsDone = state.runs.filter((r) => ['completed', 'failed', 'aborted', 'cancelled'].includes(r.status)).length;
  useEffect(() => {
    setError(null);
    ctx.api.get(withQuery(sessionPath(ctx.sid, 'files'), { area })).then((r) => setItems(r.items), (e) => setError(e.message));
  }, [area, runsDone, reloads]);
  const entry = items?.find((f) => f.path === selected);
  return html`<div class="files-view">
    <div class="files-main">
      <div class="tabs small">
        <div class="tab-group" role="tablist" aria-label="Workspace folder">
          ${AREAS.map((a) => html`<button key=${a} role="tab" aria-selected=${area === a ? 'true' : 'false'}
            class=${area === a ? 'tab active' : 'tab'} onClick=${() => { setArea(a); setSelected(null); }}>${a}/</button>`)}
        </div>
        <button class="link" onClick=${() => setReloads((n) => n + 1)}>Refresh</button>
      </div>
      ${area === 'input' && html`<${Uploader} ctx=${ctx} onUploaded=${() => setReloads((n) => n + 1)} />`}
      ${error && html`<p class="error-text">${error}</p>`}
      ${items && !items.length && html`<p class="muted">Nothing in ${area}/ yet.</p>`}
      ${items && items.length > 0 && html`<table class="files" data-area=${area}>
        <thead><tr><th>file</th><th>size</th><th>modified</th></tr></thead>
        <tbody>${items.map((f) => html`<tr key=${f.path} class=${f.path === selected ? 'selected' : ''}>
          <td><button class="link" data-file=${f.path} onClick=${() => setSelected(f.path)}>${f.path}</button></td>
          <td>${formatBytes(f.size_bytes)}</td><td>${formatTime(f.modified_at)}</td>
        </tr>`)}</tbody>
      </table>`}
      <h3>Artifacts</h3>
      <${Artifacts} ctx=${ctx} artifacts=${state.artifacts} />
    </div>
    ${entry && html`<${Preview} ctx=${ctx} entry=${entry} />`}
  </div>`;
}
