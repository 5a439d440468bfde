// The boxes of an SVG export (lib/export.js): one XML document written node by node, and an HTML box's
// background, gradient, borders and outline as SVG shapes, from its computed style.
export const SVG_NS = "http://www.w3.org/2000/svg";

export const visibleColour = (c) => Boolean(c) && c !== "transparent" && !/rgba\([^)]*,\s*0\)$/.test(c);
export const num = (x) => String(Math.round(x * 100) / 100);

/** Build SVG nodes in one XML document, so serialising escapes every text and attribute. */
export class SvgWriter {
  constructor(width, height) {
    this.doc = document.implementation.createDocument(SVG_NS, "svg", null);
    this.root = this.doc.documentElement;
    this.set(this.root, { width: num(width), height: num(height), viewBox: `0 0 ${num(width)} ${num(height)}` });
    this.clips = 0;
    this.paints = 0;
  }

  set(node, attrs) {
    for (const [k, v] of Object.entries(attrs)) if (v != null && v !== "") node.setAttribute(k, String(v));
    return node;
  }

  add(parent, tag, attrs = {}, text) {
    const node = this.set(this.doc.createElementNS(SVG_NS, tag), attrs);
    if (text != null) node.textContent = text;
    parent.append(node);
    return node;
  }

  /** A group clipped to one box (an overflow container shows only what is inside it). */
  clip(parent, box) {
    const id = `he-clip-${++this.clips}`;
    const path = this.add(this.root, "clipPath", { id });
    this.add(path, "rect", { x: num(box.x), y: num(box.y), width: num(box.width), height: num(box.height) });
    return this.add(parent, "g", { "clip-path": `url(#${id})` });
  }
}

/** The colour behind `node`: the first opaque background up its ancestors (white if none). */
export function backdrop(node) {
  for (let n = node; n; n = n.parentElement ?? n.getRootNode?.().host) {
    const c = getComputedStyle(n).backgroundColor;
    if (visibleColour(c)) return c;
  }
  return "#fff";
}

/** A CSS value split at its top-level commas (not those inside rgb(…)). */
function splitTop(text) {
  const out = [];
  let depth = 0, start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")") depth--;
    else if (text[i] === "," && !depth) { out.push(text.slice(start, i).trim()); start = i + 1; }
  }
  out.push(text.slice(start).trim());
  return out;
}

const SIDES = { "to top": 0, "to right": 90, "to bottom": 180, "to left": 270 };

/** A background's linear gradient (a bar drawn as one) as an SVG paint; a repeating one (hatching) as its first colour. */
function gradientPaint(w, image, box) {
  const match = /^(repeating-)?linear-gradient\((.*)\)$/.exec(splitTop(image)[0]);
  if (!match) return null;
  const parts = splitTop(match[2]);
  let angle = 180;
  if (/deg$/.test(parts[0])) angle = parseFloat(parts.shift());
  else if (/^to /.test(parts[0])) angle = SIDES[parts.shift()] ?? 180;
  const stops = parts.map((part) => /^(rgba?\([^)]*\)|#[0-9a-f]+|[a-z]+)\s*(.*)$/i.exec(part)).filter(Boolean)
    .map(([, colour, at]) => ({ colour, at: at.split(/\s+/).filter(Boolean) }));
  if (!stops.length) return null;
  if (match[1]) return stops[0].colour;
  const rad = (angle * Math.PI) / 180, dx = Math.sin(rad), dy = -Math.cos(rad);
  const length = Math.abs(box.width * dx) + Math.abs(box.height * dy) || 1;
  const id = `he-paint-${++w.paints}`;
  const paint = w.add(w.root, "linearGradient", { id, x1: num(0.5 - dx / 2), y1: num(0.5 - dy / 2), x2: num(0.5 + dx / 2), y2: num(0.5 + dy / 2) });
  stops.forEach((stop, i) => {
    for (const at of stop.at.length ? stop.at : [`${(100 * i) / Math.max(1, stops.length - 1)}%`]) {
      const f = at.endsWith("%") ? parseFloat(at) / 100 : parseFloat(at) / length;
      w.add(paint, "stop", { offset: num(Math.max(0, Math.min(1, f || 0))), "stop-color": stop.colour });
    }
  });
  return `url(#${id})`;
}

/** An outline (the chosen token's ring): a stroke around the box, outside its border. */
export function drawOutline(w, parent, box, cs) {
  const width = parseFloat(cs.outlineWidth) || 0;
  if (cs.outlineStyle === "none" || !width || !visibleColour(cs.outlineColor)) return;
  const out = (parseFloat(cs.outlineOffset) || 0) + width / 2;
  w.add(parent, "rect", { x: num(box.x - out), y: num(box.y - out), width: num(box.width + 2 * out), height: num(box.height + 2 * out),
    fill: "none", stroke: cs.outlineColor, "stroke-width": num(width) });
}

/** A box's background and borders: one <rect>, or one line per side when the sides differ. */
export function drawBox(w, parent, box, cs) {
  const sides = ["Top", "Right", "Bottom", "Left"].map((s) => ({
    width: parseFloat(cs[`border${s}Width`]) || 0, colour: cs[`border${s}Color`], style: cs[`border${s}Style`] }));
  const shown = sides.map((s) => s.width > 0 && s.style !== "none" && s.style !== "hidden" && visibleColour(s.colour));
  const radius = parseFloat(cs.borderTopLeftRadius) || 0;
  const fill = visibleColour(cs.backgroundColor) ? cs.backgroundColor : null;
  const same = shown.every(Boolean) && sides.every((s) => s.width === sides[0].width && s.colour === sides[0].colour);
  if (fill || same) {
    const inset = same ? sides[0].width / 2 : 0;
    w.add(parent, "rect", { x: num(box.x + inset), y: num(box.y + inset), width: num(Math.max(0, box.width - 2 * inset)),
      height: num(Math.max(0, box.height - 2 * inset)), rx: radius ? num(radius) : null, fill: fill ?? "none",
      stroke: same ? sides[0].colour : null, "stroke-width": same ? num(sides[0].width) : null,
      "stroke-dasharray": same && sides[0].style === "dashed" ? "4 3" : same && sides[0].style === "dotted" ? "1 2" : null });
  }
  const paint = cs.backgroundImage !== "none" ? gradientPaint(w, cs.backgroundImage, box) : null;
  if (paint) w.add(parent, "rect", { x: num(box.x), y: num(box.y), width: num(box.width), height: num(box.height), rx: radius ? num(radius) : null, fill: paint });
  if (same) return;
  const { x, y, width, height } = box;
  const lines = [[x, y, x + width, y], [x + width, y, x + width, y + height], [x, y + height, x + width, y + height], [x, y, x, y + height]];
  sides.forEach((s, i) => {
    if (!shown[i]) return;
    const [x1, y1, x2, y2] = lines[i];
    const half = s.width / 2 * (i === 0 || i === 3 ? 1 : -1);  // draw inside the box
    const dx = i % 2 ? half : 0, dy = i % 2 ? 0 : half;
    w.add(parent, "line", { x1: num(x1 + dx), y1: num(y1 + dy), x2: num(x2 + dx), y2: num(y2 + dy), stroke: s.colour, "stroke-width": num(s.width) });
  });
}
