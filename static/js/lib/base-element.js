// The base of every diagram: data comes in through a property, rendering happens only on screen.
// Model text is untrusted: elements build DOM with textContent, never innerHTML with model data.
import { resolveStep, controlsOf, applyControls } from "./choose.js";
import { decimal, grouped, hasLanguage, inLanguage, languageOf, loadCatalog } from "./i18n.js";

/**
 * The page's one "current step", shared by every diagram (the article's step bar, step-bar.js, moves it).
 * `selected` null: follow the latest step. Diagrams read it through `SteppedElement.step(count)`.
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

// ---- the one stylesheet of every diagram (static/css/elements.css), built once, adopted by every shadow root ----

const SHEET_URL = new URL("../../css/elements.css", import.meta.url);
const SITE = new URL(import.meta.url).origin; // Hit Enter's server, on an author's page too
let elementSheet = null;

/** Resolves with the shared CSSStyleSheet once elements.css is in (an empty one if it could not load). */
export const sheetReady = globalThis.heSheetReady ??= (async () => {
  const sheet = new CSSStyleSheet();
  try {
    const response = await fetch(SHEET_URL);
    if (!response.ok) throw new Error(`${response.status} ${SHEET_URL}`);
    sheet.replaceSync(await response.text());
  } catch (err) {
    console.warn("Hit Enter: the diagrams' stylesheet did not load", err);
  }
  return sheet;
})();
sheetReady.then((sheet) => { elementSheet = sheet; });

/**
 * The base of every diagram (after github/relative-time-element): observed attributes and new data mark it
 * dirty, and it renders at most once per animation frame, only on screen, only once its stylesheet is in.
 * It follows the page's step (`pageStep`, the scrubber) unless pinned by a `step` attribute.
 *
 * It draws into an OPEN shadow root: `this.root` is the body a subclass fills (replaceChildren etc.); around it
 * `.he-root` (part "root") resets everything inherited from the page, and a readout line (part "readout")
 * shows the title of whatever is hovered, tapped or focused, for diagrams without a readout of their own.
 * `controlsAbove` and `controlsBelow` (part "controls") hold what embed.js and the article add around it.
 * Until the first render, the element's own children (fallback content) show through a <slot>.
 */
export class SteppedElement extends HTMLElement {
  /** Show hovered titles in the readout line (a diagram with nowhere to put it, like the map, opts out). */
  static titleReadout = true;
  #data = null;
  #visible = false;
  #dirty = false;
  #frame = 0;
  #observer = null;
  #onStep = () => this.#invalidate();
  #readout;
  #asked = null; // the language whose catalog this diagram asked for

  constructor() {
    super();
    const shadow = this.shadowRoot ?? this.attachShadow({ mode: "open" });
    this.shell = el("div", { class: "he-root", part: "root" });
    /** The subclass's canvas: everything it draws goes in here (inside the shadow root). */
    this.root = el("div", { class: "he-body", part: "body" });
    this.root.append(document.createElement("slot"));
    this.#readout = el("p", { class: "he-readout he-title-readout", part: "readout", "aria-live": "polite", hidden: "" });
    /** The diagram itself (what an export draws): the body and its readout line. */
    this.figure = el("div", { class: "he-figure" });
    this.figure.append(this.root, this.#readout);
    // What an embed or the article adds around the diagram (step scrubber, prompt box; export buttons, caption):
    // inside the shadow root too, so the page's CSS cannot restyle them and they take the element's theme.
    this.controlsAbove = el("div", { class: "he-controls-above", part: "controls" });
    this.controlsBelow = el("div", { class: "he-controls-below", part: "controls" });
    this.shell.append(this.controlsAbove, this.figure, this.controlsBelow);
    shadow.replaceChildren(this.shell);
    if (elementSheet) shadow.adoptedStyleSheets = [elementSheet];
    else {
      this.shell.hidden = true; // no unstyled flash: shown with its stylesheet
      sheetReady.then((sheet) => { shadow.adoptedStyleSheets = [sheet]; this.shell.hidden = false; });
    }
    const show = (event) => this.#showTitle(event);
    for (const type of ["pointerover", "click", "focusin"]) shadow.addEventListener(type, show);
  }

  /** The run's state for this diagram (set by the article or an embed). */
  get data() { return this.#data; }
  set data(value) {
    this.#data = value;
    this.#invalidate();
  }

  // What an author chose (lib/choose.js, docs/embedding.md): `step="3"` / first / last / max-entropy pins one
  // diagram to a step (without it the diagram follows the page's step bar); `layer`, `head` and `controls` too.
  static get observedAttributes() { return ["step", "layer", "head", "controls", "lang"]; }
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
    if (!elementSheet) { sheetReady.then(() => this.#schedule()); return; }
    const run = () => { if (!this.#frame) return; this.#frame = 0; if (this.#dirty) this.#renderNow(); };
    this.#frame = requestAnimationFrame(run);
    if (this.eager) setTimeout(run, 100); // an offscreen cross-origin iframe gets no animation frames at all
  }

  /** The language this diagram's words and numbers are in: its own `lang`, else its page's (lib/i18n.js). */
  get language() { return languageOf(this); }

  #renderNow() {
    this.#dirty = false;
    if (this.#data == null) return;
    const lang = this.language;
    if (!hasLanguage(lang) && this.#asked !== lang) { // drawn in English until the catalog is in, then again
      this.#asked = lang;
      loadCatalog(SITE, lang).then((ok) => { if (ok) this.#invalidate(); });
    }
    inLanguage(lang, () => this.render(this.#data));
    // A value tip (lib/pointer.js) whose mark the redraw replaced would point at nothing.
    const tip = this.shell.heValueTip;
    if (tip && !tip.heFor?.isConnected) { tip.hidden = true; tip.heFor = null; }
    applyControls(this.root, controlsOf(this.getAttribute("controls")));  // the diagram's own, not the embed's
    // Charts and heatmaps are the "chart" part an author may style (docs/embedding.md), whichever diagram drew them.
    for (const node of this.root.querySelectorAll(".he-chart, .he-matrix")) node.setAttribute("part", "chart");
    this.dataset.rendered = String((Number(this.dataset.rendered) || 0) + 1);
  }

  /** The hovered/tapped/focused node's title in the readout line, unless the diagram keeps its own readout. */
  #showTitle(event) {
    const target = event.composedPath().find((n) => n instanceof Element && n.hasAttribute("title"));
    if (!this.constructor.titleReadout || !target || !this.root.contains(target) || this.root.querySelector("[class*=readout]")) return;
    this.#readout.textContent = target.getAttribute("title");
    this.#readout.hidden = false;
  }

  /** Subclasses draw `data` into `this.root`. */
  render(_data) {}
}

/** Define a custom element once (a second import or an embed page must not throw). */
export function define(name, cls) {
  if (!customElements.get(name)) customElements.define(name, cls);
}

/**
 * Put `node` among a diagram's controls, above or below it inside its shadow root (where the page's CSS cannot
 * restyle it), once its class is defined: before that the element has no shadow root of its own.
 */
export function addControl(element, node, where = "below") {
  const place = () => (where === "above" ? element.controlsAbove : element.controlsBelow)?.append(node);
  if (element.controlsBelow) place();
  else customElements.whenDefined(element.localName).then(place);
  return node;
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
export function caption(text) { return el("p", { class: "he-caption", part: "caption" }, text); }

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

/** Text colour readable on the background `colour` ("rgb(r, g, b)" or "#rrggbb"): near-black on light, white on dark. */
export function ink(colour) {
  const m = /rgb\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/.exec(colour) || /#(..)(..)(..)/.exec(colour);
  if (!m) return "#1d1d1f";
  const [r, g, b] = m.slice(1, 4).map((x) => (colour.startsWith("#") ? parseInt(x, 16) : Number(x)) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.18 ? "#1d1d1f" : "#fff";
}

export function fmt(x, digits = 3) {
  if (x == null || !Number.isFinite(x)) return "–";
  return Math.abs(x) >= 1000 ? grouped(x) : decimal(x, digits);
}

export function bytes(n) {
  if (n == null) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${decimal(n / 1024, 1)} KiB`;
  if (n < 1024 ** 3) return `${decimal(n / 1024 ** 2, 2)} MiB`;
  return `${decimal(n / 1024 ** 3, 2)} GiB`;
}
