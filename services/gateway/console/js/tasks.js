// The task board: each task list of the session as columns (ready, blocked, in progress, done,
// failed or cancelled), with each task's dependencies, claimant and notes. Read again when a
// run changes a task list.

import { html, useEffect, useState } from './lib.js';
import { sessionPath } from './api.js';
import { shortId } from './format.js';

const COLUMNS = [
  ['ready', 'Ready'],
  ['blocked', 'Blocked'],
  ['in_progress', 'In progress'],
  ['completed', 'Done'],
  ['ended', 'Failed or cancelled'],
];

/** The column of a task: pending tasks are ready or blocked by their dependencies. */
export function columnOf(task, view) {
  if (task.status === 'pending') return view.ready.includes(task.id) ? 'ready' : 'blocked';
  if (task.status === 'failed' || task.status === 'cancelled') return 'ended';
  return task.status;
}

function TaskCard({ task, titles }) {
  return html`<li class=${`task ${task.status}`} data-task-id=${task.id}>
    <strong>${task.title}</strong>
    ${task.description && html`<p>${task.description}</p>`}
    ${task.dependencies.length > 0 && html`<p class="muted">after ${task.dependencies.map((d) => titles[d] || shortId(d)).join(', ')}</p>`}
    ${task.claimant && html`<p class="muted">claimed by ${shortId(task.claimant)}</p>`}
    ${task.notes.length > 0 && html`<details><summary>${task.notes.length} note${task.notes.length === 1 ? '' : 's'}</summary>
      <ul>${task.notes.map((n, i) => html`<li key=${i}>${n.text}</li>`)}</ul></details>`}
  </li>`;
}

function Board({ ctx, name, signal }) {
  const [view, setView] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    ctx.api.get(sessionPath(ctx.sid, 'tasks', name)).then(setView, (e) => setError(e.message));
  }, [name, signal]);
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!view) return html`<p class="muted">Loading ${name}…</p>`;
  const tasks = Object.values(view.dag.tasks);
  const titles = Object.fromEntries(tasks.map((t) => [t.id, t.title]));
  return html`<section class="board" data-task-list=${name} aria-label=${`Task list ${name}`}>
    <h3>${name} ${view.dag.plan && html`<span class="muted">plan ${view.dag.plan.path}</span>`}</h3>
    <div class="columns">
      ${COLUMNS.map(([key, label]) => {
        const inColumn = tasks.filter((t) => columnOf(t, view) === key);
        return html`<div class="column" key=${key} data-column=${key}>
          <h4>${label} <span class="muted">${inColumn.length}</span></h4>
          <ul>${inColumn.map((t) => html`<${TaskCard} key=${t.id} task=${t} titles=${titles} />`)}</ul>
        </div>`;
      })}
    </div>
  </section>`;
}

export function Tasks({ model, ctx }) {
  const { state, activities } = model;
  const [lists, setLists] = useState(null);
  const [error, setError] = useState(null);
  const signal = `${state.runs.length}:${activities.reduce((n, a) => n + a.taskChanges, 0)}`;
  useEffect(() => {
    ctx.api.get(sessionPath(ctx.sid, 'tasks')).then((v) => setLists(v.lists), (e) => setError(e.message));
  }, [signal]);
  if (error) return html`<p class="error-text">${error}</p>`;
  if (!lists) return html`<p class="muted">Loading task lists…</p>`;
  if (!lists.length) return html`<p class="empty">No task lists in this session. Agents make them with the task tools.</p>`;
  return html`<div class="tasks">
    ${lists.map((l) => (l.available
      ? html`<${Board} key=${l.file_name} ctx=${ctx} name=${l.name} signal=${signal} />`
      : html`<div key=${l.file_name} class="error-box">${l.file_name} is unavailable: <code>${l.error?.code}</code> ${l.error?.message}</div>`))}
  </div>`;
}
