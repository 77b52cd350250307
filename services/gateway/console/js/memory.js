// Memory: the account's user.md and skill files, in an editor that keeps the ETag rules. A save
// sends If-Match with the ETag that was read ('*' when the file did not exist); when the file
// changed meanwhile (412) both versions are shown, and nothing is overwritten until the person
// chooses to.

import { html, useEffect, useState } from './lib.js';
import { MemoryHistory } from './memory_history.js';

const SKILL = /^[A-Za-z0-9_-]{1,64}$/;

function memoryPath(scope) {
  return scope === 'user' ? '/v1/memory/user' : `/v1/memory/skills/${encodeURIComponent(scope)}`;
}

function Editor({ api, scope, notify }) {
  const [file, setFile] = useState(null);
  const [draft, setDraft] = useState('');
  const [conflict, setConflict] = useState(null);
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);

  const load = async () => {
    const read = await api.get(memoryPath(scope));
    setFile(read);
    setDraft(read.content);
    setConflict(null);
    return read;
  };
  useEffect(() => {
    setFile(null);
    load().catch((err) => setStatus(err.message));
  }, [scope]);

  const write = async (etag) => {
    setBusy(true);
    try {
      const saved = await api.request('PUT', memoryPath(scope), {
        json: { content: draft },
        headers: { 'If-Match': etag ? `"${etag}"` : '*' },
      });
      setFile(saved);
      setDraft(saved.content);
      setConflict(null);
      setStatus('Saved.');
    } catch (err) {
      if (err.status === 412) {
        const theirs = await api.get(memoryPath(scope));
        setConflict(theirs);
        setStatus('');
      } else {
        setStatus(`Not saved: ${err.message}`);
      }
    } finally {
      setBusy(false);
    }
  };

  if (!file) return html`<p class="muted">${status || 'Loading…'}</p>`;
  const dirty = draft !== file.content;
  const onKey = (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === 's') {
      event.preventDefault();
      if (dirty && !conflict) write(file.etag);
    }
  };
  return html`<div class="memory-editor" data-scope=${scope}>
    <p class="muted">${file.etag ? html`ETag <code data-etag>${file.etag}</code>` : 'No file yet: saving creates it.'}
      ${dirty ? ' · unsaved changes' : ''}</p>
    <textarea aria-label=${`Contents of ${scope === 'user' ? 'user.md' : `skills/${scope}.md`}`} rows="14"
      value=${draft} onInput=${(e) => { setDraft(e.target.value); setStatus(''); }} onKeyDown=${onKey}></textarea>
    ${conflict && html`<div class="conflict" role="alert">
      <p><strong>The file changed since you opened it.</strong> Your text is kept above; this is the file now:</p>
      <pre class="text" data-theirs>${conflict.content}</pre>
      <button class="danger" disabled=${busy} onClick=${() => write(conflict.etag)}>Replace it with mine</button>
      <button disabled=${busy} onClick=${() => { setFile(conflict); setDraft(conflict.content); setConflict(null); }}>Take theirs</button>
    </div>`}
    <div class="editor-actions">
      <button class="primary" disabled=${busy || !dirty || conflict} onClick=${() => write(file.etag)}>Save</button>
      <button disabled=${busy} onClick=${() => load().then(() => setStatus('Reloaded.'), (e) => notify(e.message))}>Reload</button>
      <span role="status" class="muted">${status}</span>
    </div>
    <${MemoryHistory} key=${file.etag} api=${api} scope=${scope} etag=${file.etag}
      onRestored=${(f) => { setFile(f); setDraft(f.content); setConflict(null); setStatus('Restored.'); }} />
  </div>`;
}

export function Memory({ api, notify }) {
  const [scope, setScope] = useState('user');
  const [opened, setOpened] = useState([]);
  const [name, setName] = useState('');
  const open = (event) => {
    event.preventDefault();
    if (!SKILL.test(name)) {
      notify('A skill name is letters, digits, - and _ (up to 64).');
      return;
    }
    setOpened((o) => (o.includes(name) ? o : [...o, name]));
    setScope(name);
    setName('');
  };
  return html`<div class="memory">
    <h2>Memory</h2>
    <p class="muted">What your agents remember about you, injected into every run. Edits are yours: a
      consolidation never overwrites a change made while it ran.</p>
    <div class="tabs small">
      <div class="tab-group" role="tablist" aria-label="Memory file">
      <button role="tab" class=${scope === 'user' ? 'tab active' : 'tab'} aria-selected=${scope === 'user' ? 'true' : 'false'}
        onClick=${() => setScope('user')}>user.md</button>
      ${opened.map((s) => html`<button key=${s} role="tab" class=${scope === s ? 'tab active' : 'tab'}
        aria-selected=${scope === s ? 'true' : 'false'} onClick=${() => setScope(s)}>skills/${s}.md</button>`)}
      </div>
      <form class="inline" onSubmit=${open}>
        <input aria-label="Skill name" placeholder="skill name" value=${name} onInput=${(e) => setName(e.target.value)} />
        <button type="submit">Open skill</button>
      </form>
    </div>
    <${Editor} key=${scope} api=${api} scope=${scope} notify=${notify} />
  </div>`;
}
