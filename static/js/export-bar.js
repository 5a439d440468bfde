// The row of buttons under a diagram: "Download SVG", "Download PNG" of what it shows now, and "Copy embed
// code" for a snippet that shows the same run, step, layer and head on another page (docs/embedding.md).
// Added from outside the diagram, on the article (article/main.js) and in embeds (embed.js), into the element's own
// shadow root under the diagram (its styles are elements.css's, so the page's CSS cannot restyle the buttons).
import { addControl, el } from "./lib/base-element.js";
import { fill, gettext } from "./lib/i18n.js";

const EMBED_SCRIPT = new URL("./embed.js", import.meta.url).href;
const HOST = new URL(import.meta.url).origin;
const VIEW = ["step", "layer", "head"];  // what an embed snippet pins, read from the diagram's current view
// The author's own presentation choices (docs/embedding.md), carried over as they are.
const KEPT = ["theme", "controls", "caption", "article-href"];
const bars = new WeakMap();  // element -> its bar

/** A value as a double-quoted HTML attribute (prompts are visitors' text). */
const quote = (value) => `"${String(value).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;")}"`;

/** The diagram's current step, layer and head: its data attributes or attributes, else its own layer/head pickers. */
export function viewOf(element) {
  const root = element.shadowRoot ?? element;
  const picked = (label) => root.querySelector?.(`select[aria-label="${label}"]`)?.value;
  const view = {};
  for (const name of VIEW) {
    const label = name[0].toUpperCase() + name.slice(1);
    const value = element.dataset[name] ?? element.getAttribute(name) ?? (name === "step" ? null : picked(label));
    if (value != null && value !== "") view[name] = String(value);
  }
  return view;
}

/** `source` ({run} | {example} | {prompt, params}) plus the view, as an element's attributes, in order. */
function attributesOf(source, view, kept) {
  const pairs = [];
  if (source.run) pairs.push(["run", source.run]);
  else if (source.example) pairs.push(["example", source.example]);
  else if (source.src) pairs.push(["src", source.src]);
  else {
    pairs.push(["prompt", source.prompt ?? ""]);
    for (const [name, value] of Object.entries(source.params ?? {})) if (value != null) pairs.push([name, value]);
    pairs.push(["autostart", ""]);
  }
  for (const name of VIEW) if (view[name] != null) pairs.push([name, view[name]]);
  return [...pairs, ...kept];
}

/** The presentation attributes the embed was given (an iframe page's come from its query). */
function keptOf(element, iframe) {
  const given = iframe ? new URLSearchParams(location.search) : null;
  return KEPT.map((name) => [name, iframe ? given.get(name) : element.getAttribute(name)]).filter(([, v]) => v != null && v !== "");
}

/** The snippet for `element` showing `source` at its current view: a custom element, or an iframe. */
export function embedSnippet(element, source, { iframe = false } = {}) {
  const section = element.localName.replace(/^he-/, "");
  const pairs = attributesOf(source, viewOf(element), keptOf(element, iframe));
  const script = `<script type="module" src=${quote(EMBED_SCRIPT)}></script>`;
  if (iframe) {
    const query = new URLSearchParams(pairs.map(([k, v]) => [k, k === "autostart" ? "1" : String(v)]));
    const height = Math.ceil(document.body.getBoundingClientRect().height) || 400;
    // The section's own title (the embed page's heading) names the frame for screen readers; clipboard-write lets
    // the frame's own "Copy embed code" reach the clipboard on the author's page.
    const title = document.querySelector(".he-embed-head h1")?.textContent.trim() || section;
    return `<iframe data-he-embed src=${quote(`${HOST}/embed/${section}/?${query}`)} title=${quote(`Hit Enter: ${title}`)} `
      + `allow="clipboard-write" width="100%" height="${height}" style="border: 0"></iframe>\n${script}\n`;
  }
  const attrs = pairs.map(([k, v]) => (k === "autostart" ? " autostart" : ` ${k}=${quote(v)}`)).join("");
  return `${script}\n<${element.localName}${attrs}></${element.localName}>\n`;
}

/**
 * What an embed's feed shows, for its embed code: the same recording or example, or, for a finished live run,
 * the same prompt and parameters with the seed it ran with (an embed on another page cannot save the run).
 */
export function sourceOfFeed(feed) {
  if (feed.runId) return { run: feed.runId };
  if (feed.example) return { example: feed.example };
  if (feed.src) return { src: feed.src };  // resolved once by the feed (a full URL, or "#id" of an inline one)
  if (feed.phase !== "finished") throw new Error(gettext("the run has not finished: copy the embed code once it has"));
  const seed = feed.state.session?.params?.seed;
  return { prompt: feed.prompt, params: { ...feed.params, ...(seed != null ? { seed } : {}) } };
}

function fileName(element, ext) {
  const view = viewOf(element);
  const parts = ["hit-enter", element.localName.replace(/^he-/, ""), ...VIEW.filter((k) => view[k] != null).map((k) => `${k}-${view[k]}`)];
  return `${parts.join("-")}.${ext}`;
}

/** Put `text` on the clipboard; where the browser refuses (an iframe without clipboard-write), show it selected. */
async function copyText(bar, text) {
  try {
    await navigator.clipboard.writeText(text);
    bar.querySelector("textarea")?.remove();
    return gettext("Embed code copied.");
  } catch {
    let box = bar.querySelector("textarea");
    if (!box) {
      box = el("textarea", { readonly: "", "aria-label": gettext("Embed code"), rows: "3" });
      bar.append(box);
    }
    box.value = text;
    box.focus();
    box.select();
    return gettext("The browser did not allow copying: the embed code is selected below, press Ctrl+C (⌘C).");
  }
}

/**
 * A bar of export buttons under the diagram `element`, inside its shadow root. `source()` resolves to what the embed shows (saving the run
 * first where needed) or throws with the reason; without it there is no "Copy embed code". `data()`: a replay's recording as
 * loaded (its section's slice), offered as a file; without it there is no "Download data".
 */
export function addExportBar(element, { source = null, iframe = false, data = null } = {}) {
  if (bars.has(element)) return bars.get(element);
  const name = element.localName.replace(/^he-/, "");
  const bar = el("div", { class: "he-export-bar", role: "group", "aria-label": fill(gettext("Export the %(name)s diagram"), { name }), "data-for": element.localName });
  const status = el("output", { class: "he-export-status", "aria-live": "polite" });
  const button = (label, kind, act) => {
    const b = el("button", { type: "button", class: "secondary", "data-export": kind }, label);
    b.addEventListener("click", async () => {
      b.disabled = true;
      status.textContent = "";
      try { status.textContent = await act(); } catch (err) { status.textContent = fill(gettext("%(action)s failed: %(reason)s"), { action: label, reason: err.message }); }
      b.disabled = false;
    });
    return b;
  };
  const exporter = () => import("./lib/export.js");
  bar.append(button(gettext("Download SVG"), "svg", async () => {
    const { diagramToSvg, download } = await exporter();
    download(new Blob([diagramToSvg(element, `Hit Enter: ${name}`).svg], { type: "image/svg+xml" }), fileName(element, "svg"));
    return gettext("SVG downloaded.");
  }), button(gettext("Download PNG"), "png", async () => {
    const { diagramToSvg, svgToPng, download } = await exporter();
    download(await svgToPng(diagramToSvg(element, `Hit Enter: ${name}`), 2), fileName(element, "png"));
    return gettext("PNG downloaded.");
  }));
  if (source) bar.append(button(gettext("Copy embed code"), "embed", async () => copyText(bar, embedSnippet(element, await source(), { iframe }))));
  // A replay's data: the slice of the recording this section draws (docs/embedding.md), for src= on the author's page
  if (data) bar.append(button(gettext("Download data"), "data", async () => {
    const recording = data();
    if (!recording) throw new Error(gettext("the recording has not loaded"));
    const { download } = await exporter();
    const name = fileName(element, "json");
    download(new Blob([JSON.stringify(recording)], { type: "application/json" }), name);
    return fill(gettext("Data downloaded: %(tag)s draws it with no server."), { tag: `<${element.localName} src="${name}">` });
  }));
  bar.append(status);
  bars.set(element, bar);
  return addControl(element, bar, "below");
}
