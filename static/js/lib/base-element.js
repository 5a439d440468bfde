// The base of every diagram: data comes in through a property, rendering happens only on screen.
// Model text is untrusted: elements build DOM with textContent, never innerHTML with model data.

export class HeElement extends HTMLElement {
  #data = null;
  #visible = false;
  #dirty = false;
  #observer = null;

  /** The run's state for this diagram (set by the article or an embed). */
  get data() { return this.#data; }
  set data(value) {
    this.#data = value;
    this.#dirty = true;
    if (this.#visible) this.#renderNow();
  }

  connectedCallback() {
    if (!this.#observer) {
      this.#observer = new IntersectionObserver((entries) => {
        this.#visible = entries.some((e) => e.isIntersecting);
        if (this.#visible && this.#dirty) this.#renderNow();
      }, { rootMargin: "200px" });
    }
    this.#observer.observe(this);
  }

  // Off the page it is not visible: new data waits (dirty) instead of rendering a detached element.
  disconnectedCallback() { this.#observer?.disconnect(); this.#visible = false; }

  #renderNow() {
    this.#dirty = false;
    if (this.#data == null) return;
    this.render(this.#data);
    this.dataset.rendered = String((Number(this.dataset.rendered) || 0) + 1);
  }

  /** Subclasses draw `data` into themselves. */
  render(_data) {}
}

/** Create an element with attributes and text (text is always set as textContent). */
export function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null) continue;
    if (k === "class") node.className = v;
    // Through the CSSOM: the CSP (style-src 'self', explainer/security.py) refuses style attributes.
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v);
  }
  if (text != null) node.textContent = String(text);
  return node;
}

/** A caption saying what was measured. */
export function caption(text) { return el("p", { class: "he-caption" }, text); }

/** Visible form of a token piece: spaces and newlines shown, text stays text. */
export function showPiece(text) {
  return text.replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u21e5") || "\u2205";
}

/** A colour for a value in [0, 1] (sequential) or [-1, 1] (diverging). */
export function heat(v, diverging = false) {
  if (!Number.isFinite(v)) return "#eee";
  if (diverging) {
    const t = Math.max(-1, Math.min(1, v));
    return t >= 0 ? `rgb(${255 - 180 * t}, ${255 - 120 * t}, 255)` : `rgb(255, ${255 + 120 * t}, ${255 + 180 * t})`;
  }
  const t = Math.max(0, Math.min(1, v));
  return `rgb(${255 - 200 * t}, ${255 - 150 * t}, ${255 - 60 * t})`;
}

export function fmt(x, digits = 3) {
  if (x == null || !Number.isFinite(x)) return "–";
  return Math.abs(x) >= 1000 ? x.toLocaleString("en-US", { maximumFractionDigits: 0 }) : x.toFixed(digits);
}

export function bytes(n) {
  if (n == null) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(2)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
