// The base of every diagram: data comes in through a property, rendering happens only on screen.
// Model text is untrusted: elements build DOM with textContent, never innerHTML with model data.
import { resolveStep, controlsOf, applyControls } from "./choose.js";

/**
 * The page's one "current step", shared by every diagram (the scrubber in article.js moves it).
 * `selected` null: follow the latest step. Diagrams read it through `HeElement.step(count)`.
 */
class PageStep extends EventTarget {
  selected = null;

  /** The 1-based step to show out of `count` (0: the prefill only). */
  at(count) { return this.selected == null ? count : Math.max(0, Math.min(this.selected, count)); }

  set(step) {
    const value = step == null ? null : Math.max(0, Math.trunc(Number(step)) || 0);
    if (value === this.selected) return;
    this.selected = value;
    this.dispatchEvent(new Event("change"));
  }
}

export const pageStep = globalThis.hePageStep ??= new PageStep();

export class HeElement extends HTMLElement {
  #data = null;
  #visible = false;
  #dirty = false;
  #frame = 0;
  #observer = null;
  #onStep = () => this.#invalidate();

  /** The run's state for this diagram (set by the article or an embed). */
  get data() { return this.#data; }
  set data(value) {
    this.#data = value;
    this.#invalidate();
  }

  // What an author chose (lib/choose.js, docs/embedding.md): `step="3"` / first / last / max-entropy pins one
  // diagram to a step (without it the diagram follows the page's step bar); `layer`, `head` and `controls` too.
  static get observedAttributes() { return ["step", "layer", "head", "controls"]; }
  attributeChangedCallback() { this.#invalidate(); }

  /** The step this diagram shows out of `count` (its `step` attribute, else the page's); recorded as data-step. */
  step(count) {
    const steps = Array.from({ length: count }, (_, i) => this.#data?.steps?.[i]);
    const n = resolveStep(this.getAttribute("step"), steps) ?? pageStep.at(count);
    this.dataset.step = String(n);
    return n;
  }

  /** An embed (data-he-eager, set by embed.js) draws at once, on screen or not: it sizes itself unscrolled. */
  get eager() { return this.hasAttribute("data-he-eager"); }

  connectedCallback() {
    if (!this.#observer) {
      this.#observer = new IntersectionObserver((entries) => {
        this.#visible = entries.some((e) => e.isIntersecting);
        if (this.#visible && this.#dirty) this.#schedule();
      }, { rootMargin: "200px" });
    }
    this.#observer.observe(this);
    pageStep.addEventListener("change", this.#onStep);
  }

  // Off the page it is not visible: new data waits (dirty) instead of rendering a detached element.
  disconnectedCallback() {
    this.#observer?.disconnect();
    this.#visible = false;
    pageStep.removeEventListener("change", this.#onStep);
  }

  #invalidate() {
    this.#dirty = true;
    if (this.#visible || this.eager) this.#schedule();
  }

  /** At most one render per animation frame, however many messages or scrubs came in between. */
  #schedule() {
    if (this.#frame) return;
    const run = () => { if (!this.#frame) return; this.#frame = 0; if (this.#dirty) this.#renderNow(); };
    this.#frame = requestAnimationFrame(run);
    if (this.eager) setTimeout(run, 100); // an offscreen cross-origin iframe gets no animation frames at all
  }

  #renderNow() {
    this.#dirty = false;
    if (this.#data == null) return;
    this.render(this.#data);
    applyControls(this.shadowRoot ?? this, controlsOf(this.getAttribute("controls")));
    this.dataset.rendered = String((Number(this.dataset.rendered) || 0) + 1);
  }

  /** Subclasses draw `data` into themselves. */
  render(_data) {}
}

/** Define a custom element once (a second import or an embed page must not throw). */
export function define(name, cls) {
  if (!customElements.get(name)) customElements.define(name, cls);
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
