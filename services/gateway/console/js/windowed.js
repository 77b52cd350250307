// A list that draws only what is on screen: items of any height, in a scrolling element the
// caller owns. Heights are measured once drawn and estimated before; the items above and below
// the window are stood in for by two spacers, so the scrollbar is the whole list's. A big
// session's 2,500 nodes cost what the thirty on screen cost.

import { Component, createRef, html } from './lib.js';

const OVERSCAN_PX = 800; // drawn beyond each edge of the viewport, so a scroll rarely shows a gap

/**
 * Props: `items` (each with a unique `key`), `render(item)` → vnode, `scroller` (a ref to the
 * scrolling element, an ancestor), `estimate` (px, an undrawn item's height), `extra` (anything
 * the rendering depends on besides the items: a new value draws them again), `onResize()`
 * (called after drawn heights changed: the caller may keep the view at the bottom).
 *
 * Draws again only when `items` or `extra` change (not on a parent's every render) or when a
 * scroll or a resize moves the window.
 */
export class WindowedList extends Component {
  constructor(props) {
    super(props);
    this.heights = new Map();
    this.box = createRef();
    this.frame = null;
    this.range = [0, 0];
    this.onScroll = () => {
      if (this.frame !== null) return;
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        const next = this.window();
        if (next[0] !== this.range[0] || next[1] !== this.range[1]) this.forceUpdate();
      });
    };
  }

  shouldComponentUpdate(next) {
    return next.items !== this.props.items || next.extra !== this.props.extra;
  }

  componentDidMount() {
    const el = this.props.scroller.current;
    el?.addEventListener('scroll', this.onScroll, { passive: true });
    // The viewport resized, or an item grew (a step opened): measure again.
    this.resize = new ResizeObserver(() => this.measure(true));
    if (el) this.resize.observe(el);
    if (this.box.current) this.resize.observe(this.box.current);
    this.measure();
  }

  componentWillUnmount() {
    this.props.scroller.current?.removeEventListener('scroll', this.onScroll);
    this.resize?.disconnect();
    if (this.frame !== null) cancelAnimationFrame(this.frame);
  }

  componentDidUpdate() {
    this.measure();
  }

  heightOf(item) {
    return this.heights.get(item.key) ?? (this.props.estimate || 60);
  }

  /** `[first, end)`: the items the viewport (and the overscan around it) shows. */
  window() {
    const { items } = this.props;
    const el = this.props.scroller.current;
    const box = this.box.current;
    if (!el || !box || !items.length) return [0, Math.min(items.length, 30)];
    const top = el.scrollTop - box.offsetTop - OVERSCAN_PX;
    const bottom = el.scrollTop - box.offsetTop + el.clientHeight + OVERSCAN_PX;
    let y = 0;
    let first = items.length;
    let end = items.length;
    for (let i = 0; i < items.length; i += 1) {
      const h = this.heightOf(items[i]);
      if (first === items.length && y + h >= top) first = i;
      if (y > bottom) { end = i; break; }
      y += h;
    }
    if (first >= end) first = Math.max(0, end - 1);
    return [first, end];
  }

  /** Records the drawn items' heights; draws again when they moved the window. */
  measure(moved = false) {
    const box = this.box.current;
    if (!box) return;
    if (moved) this.onScroll();
    let changed = false;
    for (const child of box.children) {
      const key = child.dataset.winKey;
      if (key === undefined) continue;
      const h = child.offsetHeight;
      if (this.heights.get(key) !== h) {
        this.heights.set(key, h);
        changed = true;
      }
    }
    if (changed) {
      this.props.onResize?.();
      this.onScroll();
    }
  }

  render({ items, render }) {
    // Before the first layout the scroller's place is unknown: start from the end (a chat opens
    // at its newest message), a viewport's worth.
    this.range = this.box.current ? this.window() : [Math.max(0, items.length - 30), items.length];
    const [first, end] = this.range;
    let above = 0;
    for (let i = 0; i < first; i += 1) above += this.heightOf(items[i]);
    let below = 0;
    for (let i = end; i < items.length; i += 1) below += this.heightOf(items[i]);
    return html`<div class="windowed" ref=${this.box}>
      <div class="win-spacer" style=${{ height: `${above}px` }} aria-hidden="true"></div>
      ${items.slice(first, end).map((item) => html`<div class="win-item" key=${item.key} data-win-key=${item.key}>${render(item)}</div>`)}
      <div class="win-spacer" style=${{ height: `${below}px` }} aria-hidden="true"></div>
    </div>`;
  }
}
