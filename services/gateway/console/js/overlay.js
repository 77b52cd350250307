// A panel over the view (a node's details): it takes the focus when it opens, Escape closes it
// from anywhere on the page, and the focus goes back where it was when it closes.

import {
  html, useEffect, useLayoutEffect, useRef,
} from './lib.js';

const FOCUSABLE = 'button:not([disabled]), [href], input, select, textarea, [tabindex]:not([tabindex="-1"])';

export function Overlay({ label, onClose, children }) {
  const box = useRef(null);
  useLayoutEffect(() => { // layout: Escape works from the moment the panel shows
    const opener = document.activeElement;
    const onKey = (event) => {
      if (event.key === 'Escape' && !event.defaultPrevented) {
        event.preventDefault();
        onClose();
      }
    };
    document.addEventListener('keydown', onKey);
    return () => {
      document.removeEventListener('keydown', onKey);
      if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
    };
  }, []);
  useEffect(() => {
    // Its content loads after it opens: focus the first control once there is one.
    const el = box.current;
    if (!el) return undefined;
    const take = () => {
      if (el.contains(document.activeElement)) return true;
      const first = el.querySelector(FOCUSABLE);
      first?.focus();
      return Boolean(first);
    };
    if (take()) return undefined;
    const watch = new MutationObserver(() => { if (take()) watch.disconnect(); });
    watch.observe(el, { childList: true, subtree: true });
    return () => watch.disconnect();
  }, []);
  return html`<div class="overlay" role="dialog" aria-label=${label} ref=${box}>${children}</div>`;
}
