// Hit Enter's diagrams on any page (docs/embedding.md):
//   <script type="module" src="http://HOST/static/js/embed.js"></script>
//   <he-attention run="RUNID"></he-attention>                              a recording, no model
//   <he-tokens prompt="Why is the sky blue?" autostart></he-tokens>          live, its own session
//   <he-dice example="biopsy"></he-dice>                                    a shipped example, no model
//   <he-dice src="runs/sky.json" step="max-entropy"></he-dice>               any recording file, no server
// Every he-* element with a `src`, `run`, `example` or `prompt` attribute is drawn from its feed (embed-driver.js);
// each gets a caption linking back to the article, live ones a small prompt box, stepped ones a step scrubber
// (`controls`, `caption`: lib/choose.js). One with none of them says so. The script also sizes
// <iframe data-he-embed> embeds from their `he-embed-size` messages, and is the script of those iframes.
import { FeedRegistry, LiveFeed, ReplayFeed, SECTIONS, anchorOf } from "./embed-driver.js";
import { addControl, el } from "./lib/base-element.js";
import { addExportBar, sourceOfFeed } from "./export-bar.js";
import { STEPPED, authorCaption, captionOn, controlsOf, resolveStep } from "./lib/choose.js";
import { followPageTheme } from "./lib/page-theme.js";
import { fill, gettext, gettext_noop, hasLanguage, inLanguage, languageOf, loadCatalog } from "./lib/i18n.js";

const ORIGIN = new URL(import.meta.url).origin;
const ELEMENTS = SECTIONS.map((section) => `he-${section}`);
const SOURCES = ["src", "run", "example", "prompt"];
const NOTHING = gettext_noop("Nothing to show: give this element run=, example=, src= or prompt= (docs/embedding.md)");
const TROUBLE = ["error", "busy", "unreachable"]; // phases whose caption is the feed's own, whatever the author wrote
const feeds = new FeedRegistry(ORIGIN);
const driven = new WeakSet();
const emptyLines = new WeakMap(); // element -> its "nothing to show" line
// The iframe page /embed/<section>/ (its template links the styles and the article itself).
const isEmbedPage = () => document.body?.hasAttribute("data-he-embed-page") ?? false;

// ---- styles: each diagram brings its own (elements.css in its shadow root, the controls beside it too) ----------

/** Once per document: embed.css, which reserves the diagrams' heights (the author may have linked it already). */
function injectStyles() {
  const root = document.documentElement;
  if (root.hasAttribute("data-he-embed-styles") || document.querySelector('link[rel=stylesheet][href$="/css/embed.css"]')) return;
  root.setAttribute("data-he-embed-styles", ORIGIN);
  document.head.append(el("link", { rel: "stylesheet", href: new URL("../css/embed.css", import.meta.url).href }));
}

// ---- captions, the live prompt box and the step scrubber: inside the element's shadow root (addControl) ----

/** The line under an embedded diagram: what it shows, and a link to the full article. */
function addCaption(element, feed) {
  const caption = el("p", { class: "he-embed-caption" });
  const status = el("span", { class: "he-embed-status", "aria-live": "polite" });
  caption.append(status);
  // The link: the author's article-href, else where the feed's recording says its replay is (known once loaded).
  const link = el("a", { target: "_blank", rel: "noopener" }, gettext("Hit Enter — full article"));
  const section = anchorOf(element.localName.slice(3));
  addControl(element, caption, "below");
  const own = authorCaption(element.getAttribute("caption"));
  const update = () => inLanguage(languageOf(element), () => {
    link.textContent = gettext("Hit Enter — full article");
    caption.dataset.state = feed.phase;
    // The author's words replace the script's, except when the reader must know the run is not coming.
    status.textContent = own && !TROUBLE.includes(feed.phase) ? own : feed.text;
    const article = element.getAttribute("article-href") || (feed.articleUrl && `${feed.articleUrl}#${section}`);
    if (isEmbedPage() || !article) return link.remove();
    link.href = article;
    if (!link.isConnected) caption.append(" ", link);
  });
  feed.addEventListener("change", update);
  update();
  caption.heUpdate = update;
  return caption;
}

/** A small prompt box above the first element of a live feed: the reader can run it on their own words. */
function addPromptBox(element, feed) {
  const form = el("form", { class: "he-embed-form", autocomplete: "off" });
  const input = el("input", { type: "text", name: "prompt", "aria-label": gettext("Prompt"), maxlength: "2000" });
  input.value = feed.prompt;
  const play = el("button", { type: "submit", class: "primary" }, gettext("Play"));
  const stop = el("button", { type: "button" }, gettext("Stop"));
  form.append(input, play, stop);
  form.addEventListener("submit", (event) => { event.preventDefault(); feed.start(input.value); });
  stop.addEventListener("click", () => feed.stop());
  const update = () => inLanguage(languageOf(element), () => {
    const phase = feed.phase;
    input.setAttribute("aria-label", gettext("Prompt"));
    stop.textContent = gettext("Stop");
    stop.disabled = !["queued", "prefilling", "running", "paused"].includes(phase);
    play.textContent = stop.disabled ? gettext("Play") : gettext("Restart");
  });
  feed.addEventListener("change", update);
  update();
  form.heUpdate = update;
  return addControl(element, form, "above");
}

/** A step scrubber above a stepped diagram: it writes the element's `step` attribute. */
function addScrubber(element, feed) {
  const input = el("input", { type: "range", min: "0", max: "0", step: "1", value: "0" });
  const out = el("output", { class: "he-embed-step" });
  const word = el("span");
  const label = el("label", {});
  label.append(word, input);
  const box = el("div", { class: "he-embed-scrubber" });
  box.append(label, out);
  input.addEventListener("input", () => element.setAttribute("step", input.value));
  const update = () => inLanguage(languageOf(element), () => {
    word.textContent = `${gettext("Step:")} `; // the scrubber's label ("Step" alone is the article's Step button)
    input.setAttribute("aria-label", gettext("Step:"));
    const steps = feed.state.steps;
    const k = resolveStep(element.getAttribute("step"), steps) ?? steps.length;
    input.max = String(steps.length);
    input.value = String(k);
    input.disabled = steps.length === 0;
    const count = steps.length;
    out.textContent = !count ? gettext("no steps yet")
      : k ? fill(gettext("step %(step)s of %(count)s"), { step: k, count }) : fill(gettext("the prompt (step 0 of %(count)s)"), { count });
  });
  feed.addEventListener("change", update);
  new MutationObserver(update).observe(element, { attributes: true, attributeFilter: ["step"] });
  update();
  box.heUpdate = update;
  return addControl(element, box, "above");
}

/**
 * `compare` on a diagram of a saved compare run (issue 29): run B's twin of the diagram right after it, each with
 * its label ("A: temperature 0.2", "B: temperature 1.3"), the twin at the element's step. A recording of one run
 * says so under the diagram instead.
 */
function addTwin(element, feed) {
  const twin = document.createElement(element.localName);
  driven.add(twin); // drawn from run B here, never a feed of its own
  twin.setAttribute("data-he-twin", "b");
  twin.setAttribute("data-run", "b"); // as the article's twins: a diagram may draw run B's form (he-timeline)
  twin.setAttribute("controls", "none");
  for (const name of ["lang", "theme", "step"]) if (element.hasAttribute(name)) twin.setAttribute(name, element.getAttribute(name));
  const labelA = el("p", { class: "he-embed-run-label", "data-run": "a" });
  const labelB = el("p", { class: "he-embed-run-label", "data-run": "b" });
  addControl(element, labelA, "above");
  loadElement(twin);
  let placed = false;
  const update = () => inLanguage(languageOf(element), () => {
    if (!feed.ready) return;
    const pair = feed.pair.active;
    labelA.hidden = false;
    labelA.textContent = pair ? feed.pair.label("a") : gettext("This recording holds one run: there is no run B to compare.");
    labelB.textContent = pair ? feed.pair.label("b") : "";
    if (pair && !placed) { // in the document first: an element is upgraded (and has its controls) once connected
      element.after(twin);
      addControl(twin, labelB, "above");
      placed = true;
    }
    if (pair && customElements.get(twin.localName)) twin.data = feed.pair.b;
  });
  customElements.whenDefined(twin.localName).then(update);
  new MutationObserver(() => {  // the scrubber moves the element's step: the twin shows the same step
    const step = element.getAttribute("step");
    if (step == null) twin.removeAttribute("step");
    else twin.setAttribute("step", step);
  }).observe(element, { attributes: true, attributeFilter: ["step"] });
  feed.addEventListener("change", update);
  update();
}

/** The line an element with no source gets instead of an empty box. */
function sayNothing(element) {
  if (driven.has(element) || emptyLines.has(element)) return;
  const line = el("p", { class: "he-embed-caption", "data-state": "empty", role: "note" }, gettext(NOTHING));
  emptyLines.set(element, line);
  loadElement(element);
  addControl(element, line, "below");
}

function loadElement(element) {
  element.setAttribute("data-he-eager", "");  // draw off screen too: the embed sizes itself before it is scrolled to
  import(new URL(`./elements/${element.localName}.js`, import.meta.url).href)
    .catch((err) => console.warn(`Hit Enter: diagram ${element.localName} did not load`, err));
}

// ---- when the data cannot come: the author's fallback content, not empty controls -------------------

/** Whether the author put fallback content inside the element (shown until the diagram draws). */
const hasFallback = (element) => [...element.childNodes].some((n) => n.nodeType === Node.ELEMENT_NODE || n.textContent.trim());
const fallbackSlots = new WeakMap(); // element -> the <slot> that shows its fallback again in place of the diagram

/** Show the fallback content instead of the drawn diagram (a live embed whose server is gone), or undo that. */
function showFallback(element, on) {
  if (!element.figure) return;
  let slot = fallbackSlots.get(element);
  if (on && !slot) fallbackSlots.set(element, slot = el("slot", { class: "he-fallback" }));
  element.figure.hidden = on;
  if (on) element.controlsAbove.after(slot);
  else slot?.remove();
}

/**
 * Follow the feed's health: a recording that failed keeps the fallback alone (no scrubber or export buttons for
 * nothing; the caption's reason only where there is no fallback); a live server out of reach shows the fallback.
 */
function followHealth(element, feed, { scrubber, bar, caption }) {
  const update = () => {
    const failed = feed instanceof ReplayFeed && feed.phase === "error";
    const gone = feed.phase === "unreachable" && feed.state.steps.length === 0;
    const fallback = hasFallback(element);
    element.toggleAttribute("data-he-failed", failed); // embed.css: no reserved height kept for a diagram that cannot come
    for (const node of [scrubber, bar]) if (node) node.hidden = failed || gone;
    if (caption) caption.hidden = failed && fallback;
    if (failed && !fallback) console.warn(`Hit Enter: ${element.localName}: ${feed.text}`);
    customElements.whenDefined(element.localName).then(() => showFallback(element, gone && fallback));
  };
  feed.addEventListener("change", update);
  update();
}

// ---- driving the elements -------------------------------------------------------------------

function drive(element) {
  if (driven.has(element)) return;
  const feed = feeds.feedFor(element);
  if (!feed) return sayNothing(element);
  driven.add(element);
  emptyLines.get(element)?.remove();
  emptyLines.delete(element);
  const first = feed.elements.size === 0;
  const controls = controlsOf(element.getAttribute("controls"));
  const live = feed instanceof LiveFeed;
  loadElement(element);
  const form = first && live && controls === "full" ? addPromptBox(element, feed) : null;
  const scrubber = controls !== "none" && STEPPED.includes(element.localName.slice(3)) ? addScrubber(element, feed) : null;
  feed.attach(element);
  // controls="none" is the bare diagram: no export buttons either.
  const bar = controls !== "none" ? addExportBar(element, { source: async () => sourceOfFeed(feed), iframe: isEmbedPage(),
    data: "recording" in feed ? () => feed.recording : null }) : null;
  const caption = captionOn(element.getAttribute("caption")) ? addCaption(element, feed) : null;
  followHealth(element, feed, { scrubber, bar, caption });
  if (element.hasAttribute("compare") && "pair" in feed) addTwin(element, feed);
  // Its own language (lang=, else the page's): drawn in English until that language's words are in, then again.
  const lang = languageOf(element);
  if (lang && !hasLanguage(lang)) {
    loadCatalog(ORIGIN, lang).then((ok) => { if (ok) for (const node of [form, scrubber, caption]) node?.heUpdate?.(); });
  }
  // Without a prompt box nothing could press Play: a live diagram with fewer controls runs at once.
  const autostart = element.hasAttribute("autostart") || controls !== "full";
  if (live && autostart && !feed.started) feed.start();
}

const SECTION_SELECTOR = ELEMENTS.join(", ");

function scan(root = document) {
  if (root.matches?.(SECTION_SELECTOR)) drive(root);
  for (const element of root.querySelectorAll(SECTION_SELECTOR)) drive(element);
}

/** Elements added later (a page that renders its own content) are driven too; diagrams redrawing are skipped. */
function watch() {
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") { if (ELEMENTS.includes(record.target.localName)) drive(record.target); continue; }
      if (record.target instanceof Element && record.target.closest(SECTION_SELECTOR)) continue;
      for (const node of record.addedNodes) if (node instanceof Element) scan(node);
    }
  }).observe(document.documentElement, { childList: true, subtree: true, attributes: true, attributeFilter: SOURCES });
}

// ---- iframes: the embed page posts its height, the host page sizes the iframe ----------------------

// An iframe whose page never says its height is not an embed page (the server is down: the browser's error page;
// or it answered with an error): after this long from its load (or from this script's start, for one loaded
// before), its reserved box is given back (data-he-failed, embed.css), so the error shows instead of a blank box.
const SILENT_AFTER_LOAD_MS = 3000;
const SILENT_AFTER_START_MS = 10_000;

function sizeIframes() {
  const sized = new WeakSet();
  window.addEventListener("message", (event) => {
    if (event.data?.type !== "he-embed-size") return;
    const frame = [...document.querySelectorAll("iframe[data-he-embed]")].find((f) => f.contentWindow === event.source);
    const height = Number(event.data.height);
    if (!frame || new URL(frame.src, location.href).origin !== event.origin) return;
    if (!(Number.isFinite(height) && height > 0 && height < 100_000)) return;
    sized.add(frame);
    frame.removeAttribute("data-he-failed");  // a slow server after all
    frame.style.height = `${Math.ceil(height)}px`;
  });
  // An embed page that drew before this listener existed posted its height to nobody, and posts again only when
  // it changes: ask each iframe for it (one whose page is not listening yet will post once it starts).
  for (const frame of document.querySelectorAll("iframe[data-he-embed]")) {
    const ask = () => frame.contentWindow?.postMessage({ type: "he-embed-size-request" }, new URL(frame.src, location.href).origin);
    const giveUpAfter = (ms) => setTimeout(() => { if (!sized.has(frame)) frame.setAttribute("data-he-failed", ""); }, ms);
    ask();
    giveUpAfter(SILENT_AFTER_START_MS);
    frame.addEventListener("load", () => { ask(); giveUpAfter(SILENT_AFTER_LOAD_MS); });
  }
}

function postHeight() {
  if (!isEmbedPage() || window.parent === window) return;
  let last = 0;
  const post = () => {
    const height = Math.ceil(document.body.getBoundingClientRect().height);
    if (height === last) return;
    last = height;
    window.parent.postMessage({ type: "he-embed-size", height, section: document.body.dataset.heEmbedPage }, "*");
  };
  new ResizeObserver(post).observe(document.body);
  window.addEventListener("message", (event) => {  // the host page's script has just started (sizeIframes)
    if (event.source === window.parent && event.data?.type === "he-embed-size-request") { last = 0; post(); }
  });
  // An offscreen cross-origin iframe gets no rendering updates, so no ResizeObserver calls either: changes to
  // the page post too, from a timer, and the iframe is sized before anyone scrolls to it.
  let timer = 0;
  new MutationObserver(() => { clearTimeout(timer); timer = setTimeout(post, 50); })
    .observe(document.body, { childList: true, subtree: true, attributes: true, characterData: true });
  post();
}

function init() {
  followPageTheme();
  injectStyles();
  sizeIframes();
  postHeight();
  scan();
  watch();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
