// Hit Enter's diagrams on any page (docs/embedding.md):
//   <script type="module" src="http://HOST/static/js/embed.js"></script>
//   <he-attention run="RUNID"></he-attention>                              a recording, no model
//   <he-tokens prompt="Why is the sky blue?" autostart></he-tokens>          live, its own session
//   <he-dice example="biopsy"></he-dice>                                    a shipped example, no model
// Every he-* element with a `run`, `example` or `prompt` attribute is drawn from its feed (embed-driver.js); each gets
// a caption linking back to the article, live ones a small prompt box. The script also sizes
// <iframe data-he-embed> embeds from their `he-embed-size` messages, and is the script of those iframes.
import { FeedRegistry, LiveFeed, SECTIONS, anchorOf } from "./embed-driver.js";
import { el } from "./lib/base-element.js";

const ORIGIN = new URL(import.meta.url).origin;
const ELEMENTS = SECTIONS.map((section) => `he-${section}`);
const DRIVEN = ELEMENTS.flatMap((name) => [`${name}[run]`, `${name}[example]`, `${name}[prompt]`]).join(", ");
const feeds = new FeedRegistry(ORIGIN);
const driven = new WeakSet();
// The iframe page /embed/<section>/ (its template links the styles and the article itself).
const isEmbedPage = () => document.body?.hasAttribute("data-he-embed-page") ?? false;

// ---- styles: each diagram brings its own (elements.css in its shadow root); the page gets embed.css only ------

/** Once per document: embed.css, for the caption and prompt box embed.js adds beside the diagrams. */
async function injectStyles() {
  const root = document.documentElement;
  if (root.hasAttribute("data-he-embed-styles") || document.querySelector(`link[href$="/static/css/embed.css"]`)) return;
  root.setAttribute("data-he-embed-styles", ORIGIN);
  document.head.append(el("link", { rel: "stylesheet", href: new URL("../css/embed.css", import.meta.url).href }));
}

// ---- captions and the live prompt box -------------------------------------------------------

/** The line under an embedded diagram: what it shows, and a link to the full article. */
function addCaption(element, feed) {
  const caption = el("p", { class: "he-embed-caption", "data-theme": element.getAttribute("theme") });
  const status = el("span", { class: "he-embed-status", "aria-live": "polite" });
  caption.append(status);
  if (!isEmbedPage()) {
    const link = el("a", { href: `${feed.articleUrl}#${anchorOf(element.localName.slice(3))}`, target: "_blank", rel: "noopener" },
      "Hit Enter — full article");
    caption.append(" ", link);
  }
  element.after(caption);
  const update = () => {
    caption.dataset.state = feed.phase;
    status.textContent = feed.text;
  };
  feed.addEventListener("change", update);
  update();
}

/** A small prompt box above the first element of a live feed: the reader can run it on their own words. */
function addPromptBox(element, feed) {
  const form = el("form", { class: "he-embed-form", autocomplete: "off", "data-theme": element.getAttribute("theme") });
  const input = el("input", { type: "text", name: "prompt", "aria-label": "Prompt", maxlength: "2000" });
  input.value = feed.prompt;
  const play = el("button", { type: "submit", class: "primary" }, "Play");
  const stop = el("button", { type: "button" }, "Stop");
  form.append(input, play, stop);
  form.addEventListener("submit", (event) => { event.preventDefault(); feed.start(input.value); });
  stop.addEventListener("click", () => feed.stop());
  const update = () => {
    const phase = feed.phase;
    stop.disabled = phase !== "running" && phase !== "paused";
    play.textContent = stop.disabled ? "Play" : "Restart";
  };
  feed.addEventListener("change", update);
  update();
  element.before(form);
}

// ---- driving the elements -------------------------------------------------------------------

function drive(element) {
  if (driven.has(element)) return;
  const feed = feeds.feedFor(element);
  if (!feed) return;
  driven.add(element);
  const first = feed.elements.size === 0;
  import(new URL(`./elements/${element.localName}.js`, import.meta.url).href)
    .catch((err) => console.warn(`Hit Enter: diagram ${element.localName} did not load`, err));
  if (first && feed instanceof LiveFeed) addPromptBox(element, feed);
  feed.attach(element);
  addCaption(element, feed);
  if (feed instanceof LiveFeed && element.hasAttribute("autostart") && !feed.started) feed.start();
}

function scan(root = document) {
  if (root.matches?.(DRIVEN)) drive(root);
  for (const element of root.querySelectorAll(DRIVEN)) drive(element);
}

/** Elements added later (a page that renders its own content) are driven too; diagrams redrawing are skipped. */
function watch() {
  const inside = ELEMENTS.join(", ");
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.target instanceof Element && record.target.closest(inside)) continue;
      for (const node of record.addedNodes) if (node instanceof Element) scan(node);
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
}

// ---- iframes: the embed page posts its height, the host page sizes the iframe ----------------------

function sizeIframes() {
  window.addEventListener("message", (event) => {
    if (event.data?.type !== "he-embed-size") return;
    const frame = [...document.querySelectorAll("iframe[data-he-embed]")].find((f) => f.contentWindow === event.source);
    const height = Number(event.data.height);
    if (!frame || new URL(frame.src, location.href).origin !== event.origin) return;
    if (Number.isFinite(height) && height > 0 && height < 100_000) frame.style.height = `${Math.ceil(height)}px`;
  });
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
  post();
}

function init() {
  injectStyles().catch((err) => console.warn("Hit Enter: the diagrams' styles did not load", err));
  sizeIframes();
  postHeight();
  scan();
  watch();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
