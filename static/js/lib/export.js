// A rendered diagram as a standalone SVG, whatever drew it: HTML boxes become <rect>s, text runs become
// <text> (text stays text, set through textContent, never markup), inline <svg> and <canvas> are copied in
// place, text that CSS draws (`content`) included; the diagram's controls are left out. PNG = that SVG drawn on
// a canvas. Used by export-bar.js on the article and in embeds.
import { SvgWriter, backdrop, drawBox, drawOutline, num } from "./svg-boxes.js";
import { gettext } from "./i18n.js";

const SKIP = new Set(["SCRIPT", "STYLE", "TEMPLATE", "LINK", "META", "OPTION", "DATALIST", "NOSCRIPT"]);
// Controls are for the reader on the page, not part of the picture: a menu, button, slider or "Show as table"
// toggle (a <details> with the table it opens) is left out, with the label that names it and a group of them
// (a fork row, the measure bar with its status). Not painted, the space they took stays as drawn.
const CONTROL = "button, select, input, textarea, details, [role=button], [role=slider], [role=spinbutton], [role=switch], "
  + "[role=checkbox], [role=radio], [role=combobox], [role=listbox], [role=tab]";
const CONTROL_GROUP = "[role=group], [role=toolbar], [role=radiogroup], [role=tablist], .he-measure-bar";
// Computed properties copied onto an inline SVG's parts: its stylesheet rules do not travel with it.
const SVG_PROPS = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "stroke-dasharray", "opacity",
  "font-family", "font-size", "font-weight", "text-anchor", "dominant-baseline"];

const measurer = document.createElement("canvas").getContext("2d");

/** Where the baseline sits in a line box of `height` for this font (its ascent's share of the box). */
function baseline(cs, top, height) {
  measurer.font = cs.font || `${cs.fontSize} ${cs.fontFamily}`;
  const m = measurer.measureText("Hg");
  const ascent = m.fontBoundingBoxAscent || parseFloat(cs.fontSize) * 0.8;
  const descent = m.fontBoundingBoxDescent || parseFloat(cs.fontSize) * 0.2;
  return top + (height * ascent) / (ascent + descent);
}

function transform(text, cs) {
  if (cs.textTransform === "uppercase") return text.toUpperCase();
  if (cs.textTransform === "lowercase") return text.toLowerCase();
  return text;
}

/** One <text> per line a text node occupies (a wrapped caption is several lines), at its on-screen place. */
function drawText(w, parent, textNode, cs, origin) {
  const raw = textNode.data;
  const pre = /pre/.test(cs.whiteSpace);
  if (!raw.trim()) return;
  const range = document.createRange();
  range.selectNodeContents(textNode);
  const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
  if (!rects.length) return;
  const vertical = /^(vertical|sideways)/.test(cs.writingMode);
  const lines = rects.length > 1 && !vertical ? splitLines(textNode, range, pre) : [trimmedLine(textNode, range, pre)];
  for (const line of lines) {
    const text = transform(pre ? line.text : line.text.replace(/\s+/g, " "), cs);
    if (!text || !line.rect) continue;
    const r = line.rect;
    const attrs = { fill: cs.color, "font-family": cs.fontFamily, "font-size": cs.fontSize,
      "font-weight": cs.fontWeight !== "400" ? cs.fontWeight : null, "font-style": cs.fontStyle !== "normal" ? cs.fontStyle : null,
      "xml:space": pre ? "preserve" : null, lengthAdjust: text.length > 1 ? "spacingAndGlyphs" : null };
    if (vertical) Object.assign(attrs, verticalPlace(cs, r, origin), { textLength: text.length > 1 ? num(r.height) : null });
    else Object.assign(attrs, { x: num(r.left - origin.x), y: num(baseline(cs, r.top, r.height) - origin.y), textLength: text.length > 1 ? num(r.width) : null });
    w.add(parent, "text", attrs, text);
  }
}

/** Sideways text (a matrix's column labels): turned a quarter, read upwards when the box is turned half a turn. */
function verticalPlace(cs, r, origin) {
  const upwards = /^matrix\(-1,/.test(cs.transform.replace(/\s/g, "")) || cs.writingMode === "sideways-lr";
  const across = baseline(cs, 0, r.width);  // the baseline's distance from the glyphs' top side
  const x = (upwards ? r.left + across : r.right - across) - origin.x;
  const y = (upwards ? r.bottom : r.top) - origin.y;
  return { x: num(x), y: num(y), transform: `rotate(${upwards ? -90 : 90} ${num(x)} ${num(y)})` };
}

/** A one-line text node: its text without the collapsed spaces at its ends, and the box of what is left. */
function trimmedLine(textNode, range, pre) {
  const raw = textNode.data;
  const first = pre ? 0 : raw.search(/\S/);
  const last = pre ? raw.length : raw.trimEnd().length;
  range.setStart(textNode, first);
  range.setEnd(textNode, last);
  const rect = range.getBoundingClientRect();
  return { text: raw.slice(first, last), rect: rect.width || rect.height ? rect : null };
}

/** A wrapped text node's lines: characters grouped by the line box they fall in, boxed without edge spaces. */
function splitLines(textNode, range, pre) {
  const lines = [];
  let current = null;
  for (let i = 0; i < textNode.length; i++) {
    const ch = textNode.data[i];
    range.setStart(textNode, i);
    range.setEnd(textNode, i + 1);
    const r = [...range.getClientRects()].find((b) => b.height > 0);
    if (!r || (!pre && /\s/.test(ch))) { if (current) current.text += ch; continue; }
    if (!current || r.top >= current.bottom - 1) {
      current = { text: "", rect: null, bottom: r.bottom };
      lines.push(current);
    }
    current.text += ch;
    const box = current.rect;
    current.rect = box ? new DOMRect(Math.min(box.left, r.left), Math.min(box.top, r.top),
      Math.max(box.right, r.right) - Math.min(box.left, r.left), Math.max(box.bottom, r.bottom) - Math.min(box.top, r.top)) : DOMRect.fromRect(r);
  }
  for (const line of lines) line.text = pre ? line.text.replace(/[\r\n]/g, "") : line.text.trim();
  return lines;
}

/** An inline <svg>, copied as it is into place, with its computed paint written onto each part. */
function copySvg(w, parent, svg, box) {
  const copy = w.doc.importNode(svg, true);
  const originals = [svg, ...svg.querySelectorAll("*")];
  const copies = [copy, ...copy.querySelectorAll("*")];
  originals.forEach((node, i) => {
    const cs = getComputedStyle(node);
    for (const prop of SVG_PROPS) {
      const value = cs.getPropertyValue(prop);
      if (value && !copies[i].hasAttribute(prop)) copies[i].setAttribute(prop, value);
    }
    copies[i].removeAttribute("style");
    copies[i].removeAttribute("class");
  });
  w.set(copy, { x: num(box.x), y: num(box.y), width: num(box.width), height: num(box.height) });
  parent.append(copy);
}

/** A control, the label naming one, or a group holding them (see CONTROL). */
function isControl(node) {
  if (node.matches(CONTROL)) return true;
  if (node.tagName === "LABEL") return Boolean(node.control?.matches(CONTROL));  // "Layer", "memory (GiB)"
  return node.matches(CONTROL_GROUP) && Boolean(node.querySelector(CONTROL));  // a chart's focusable group stays
}

/** The text a pseudo-element's `content` draws: its strings and attr()s, up to an alternative text after "/". */
function generatedText(node, cs) {
  if (cs.display === "none") return "";
  let text = "";
  for (const [token, string, attr] of cs.content.matchAll(/"((?:[^"\\]|\\.)*)"|attr\(\s*([\w-]+)\s*\)|\//g)) {
    if (token === "/") break;
    text += string != null ? string.replace(/\\([0-9a-f]{1,6}) ?|\\(.)/gi, (_, hex, ch) => ch ?? String.fromCodePoint(parseInt(hex, 16)))
      : node.getAttribute(attr) ?? "";
  }
  return text;
}

/** Every element under `root`, into open shadow roots (the walk draws those too). */
function* elementsIn(root) {
  for (const node of root.querySelectorAll("*")) {
    yield node;
    if (node.shadowRoot) yield* elementsIn(node.shadowRoot);
  }
}

// Hides the pseudo-elements stood in for (below): an attribute names which, in the tree they are styled in.
const UNDRAWN = new CSSStyleSheet();
UNDRAWN.replaceSync("[data-he-export-pseudo~=before]::before, [data-he-export-pseudo~=after]::after { content: none !important }");

/**
 * Text drawn by CSS (`::before`/`::after` content: the "→" between stages) is in no DOM node for the walk to
 * find: while the export runs, each such pseudo-element is replaced by a <span> with its computed style and
 * text, which the layout puts where the pseudo-element was. Returns what puts everything back.
 */
function standInForPseudos(top) {
  const undo = [], roots = new Set();
  for (const node of [top, ...elementsIn(top), ...(top.shadowRoot ? elementsIn(top.shadowRoot) : [])]) {
    if (node.closest(CONTROL)) continue;
    const hidden = [];
    for (const where of ["before", "after"]) {
      const cs = getComputedStyle(node, `::${where}`);
      const text = generatedText(node, cs);
      if (!text) continue;
      const span = document.createElement("span");
      for (const prop of cs) if (prop !== "content") span.style.setProperty(prop, cs.getPropertyValue(prop));
      span.textContent = text;
      if (where === "before") node.prepend(span); else node.append(span);
      hidden.push(where);
      undo.push(() => span.remove());
    }
    if (!hidden.length) continue;
    roots.add(node.getRootNode());
    node.setAttribute("data-he-export-pseudo", hidden.join(" "));
    undo.push(() => node.removeAttribute("data-he-export-pseudo"));
  }
  for (const root of roots) {
    const sheets = root.adoptedStyleSheets;
    root.adoptedStyleSheets = [...sheets, UNDRAWN];
    undo.push(() => { root.adoptedStyleSheets = sheets; });
  }
  return () => undo.reverse().forEach((f) => f());
}

function walk(w, parent, node, origin) {
  if (!(node instanceof Element) || SKIP.has(node.tagName) || isControl(node)) return;
  const cs = getComputedStyle(node);
  if (cs.display === "none" || Number(cs.opacity) === 0) return;
  const rect = node.getBoundingClientRect();
  const box = { x: rect.left - origin.x, y: rect.top - origin.y, width: rect.width, height: rect.height };
  if (cs.position === "absolute" && rect.width <= 1 && rect.height <= 1 && cs.overflowX !== "visible") return;  // screen-reader-only text
  const shown = cs.visibility !== "hidden";
  if (node instanceof SVGSVGElement) { if (shown) copySvg(w, parent, node, box); return; }
  if (node instanceof SVGElement) return;  // parts of an SVG are copied with it
  if (Number(cs.opacity) < 1) parent = w.add(parent, "g", { opacity: cs.opacity });  // a faded row stays faded
  if (shown && rect.width && rect.height) { drawBox(w, parent, box, cs); drawOutline(w, parent, box, cs); }
  if (node instanceof HTMLCanvasElement) {
    try { w.add(parent, "image", { x: num(box.x), y: num(box.y), width: num(box.width), height: num(box.height), href: node.toDataURL() }); } catch { /* a tainted canvas stays out */ }
    return;
  }
  const clipped = cs.overflowX !== "visible" || cs.overflowY !== "visible";
  const into = clipped && rect.width && rect.height ? w.clip(parent, box) : parent;
  const children = node.shadowRoot ? node.shadowRoot.childNodes : node.childNodes;
  for (const child of children) {
    if (child.nodeType === Node.TEXT_NODE) { if (shown) drawText(w, into, child, cs, origin); }
    else if (child instanceof HTMLSlotElement) for (const slotted of child.assignedNodes({ flatten: true })) visit(w, into, slotted, cs, origin);
    else walk(w, into, child, origin);
  }
}

function visit(w, parent, node, cs, origin) {
  if (node.nodeType === Node.TEXT_NODE) drawText(w, parent, node, cs, origin);
  else walk(w, parent, node, origin);
}

/**
 * The diagram `element` as it is drawn now: {svg (text), width, height} in CSS pixels. Only the diagram: a
 * Hit Enter element's `figure` (base-element.js), without the scrubber, buttons and caption around it.
 */
export function diagramToSvg(element, title = element.localName) {
  const figure = element.figure?.isConnected ? element.figure : null;
  const putBack = standInForPseudos(figure ?? element);
  try {
    const rect = (figure ?? element).getBoundingClientRect();
    const origin = { x: rect.left, y: rect.top };
    const w = new SvgWriter(rect.width, rect.height);
    w.add(w.root, "title", {}, title);
    w.add(w.root, "rect", { x: 0, y: 0, width: num(rect.width), height: num(rect.height), fill: backdrop(figure ?? element) });
    const cs = getComputedStyle(element);
    if (figure) walk(w, w.root, figure, origin);
    else {
      drawBox(w, w.root, { x: 0, y: 0, width: rect.width, height: rect.height }, cs);
      for (const child of (element.shadowRoot ?? element).childNodes) visit(w, w.root, child, cs, origin);
    }
    const svg = `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(w.root)}\n`;
    return { svg, width: rect.width, height: rect.height };
  } finally {
    putBack();  // the page as it was, whatever happened
  }
}

/** That SVG drawn on a canvas at `scale` (2: sharp on high-density screens) as a PNG blob. */
export async function svgToPng({ svg, width, height }, scale = 2) {
  const image = new Image();
  image.decoding = "sync";
  // A data: URL, which the site's CSP allows for images (img-src 'self' data:); blob: it does not.
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = Math.max(1, Math.round(width * scale));
  canvas.height = Math.max(1, Math.round(height * scale));
  const ctx = canvas.getContext("2d");
  ctx.scale(scale, scale);
  ctx.drawImage(image, 0, 0, width, height);
  return new Promise((resolve, reject) => canvas.toBlob((blob) => (blob ? resolve(blob) : reject(new Error(gettext("the PNG could not be encoded")))), "image/png"));
}

/** Save `blob` as a file named `name` (a download through a blob: URL, revoked once used). */
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
