// Entry point: mounts the console in place of the loading note.
import { html, render } from './lib.js';
import { App } from './app.js';

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
