// Values at the pointer (issue 23): the value of a hovered, tapped or focused mark in a box right beside it
// (a readout line far below the mark is off screen), kept inside the viewport, and the keyboard moving between
// a diagram's marks: one tab stop per group, arrow keys, Home/End (as the heatmaps in grid.js do).
import { el } from "./base-element.js";

const GAP = 4; // px between the mark and its value

/** The box the tip must stay inside: the viewport, cut to the first ancestor that clips (a scroll box). */
function bounds(tip) {
  const box = { left: 0, top: 0, right: document.documentElement.clientWidth || innerWidth, bottom: innerHeight };
  for (let n = tip.parentElement; n; n = n.parentElement ?? n.getRootNode?.().host) {
    const cs = getComputedStyle(n);
    if (cs.overflowX === "visible" && cs.overflowY === "visible") continue;
    const r = n.getBoundingClientRect();
    return { left: Math.max(box.left, r.left), top: Math.max(box.top, r.top), right: Math.min(box.right, r.right), bottom: Math.min(box.bottom, r.bottom) };
  }
  return box;
}

const clamp = (v, lo, hi) => Math.max(lo, Math.min(v, hi));

/** Show `tip` (absolutely positioned) beside `node`: on its right, else its left, else below or above it. */
export function placeBeside(tip, node) {
  tip.hidden = false;
  tip.style.transform = "";
  tip.style.left = "0px";
  tip.style.top = "0px";
  // Where left/top 0 lands on screen: offsets from there hold whatever box the tip is positioned in.
  const origin = tip.getBoundingClientRect();
  const r = node.getBoundingClientRect();
  const b = bounds(tip);
  const w = origin.width, h = origin.height;
  let x, y = clamp(r.top, b.top, b.bottom - h);
  if (r.right + GAP + w <= b.right) x = r.right + GAP;
  else if (r.left - GAP - w >= b.left) x = r.left - GAP - w;
  else {
    // No room at either side (a full-width row, a phone): under the mark, or over it near the bottom edge.
    x = clamp(r.left, b.left, b.right - w);
    y = r.bottom + GAP + h <= b.bottom || r.top - GAP - h < b.top ? r.bottom + GAP : r.top - GAP - h;
  }
  tip.style.left = `${Math.round(x - origin.left)}px`;
  tip.style.top = `${Math.round(y - origin.top)}px`;
}

/** The value tip of the diagram `node` is drawn in: one per shadow root, beside the diagram (not in its export). */
function tipOf(node) {
  const root = node.getRootNode();
  const box = root.host?.shell ?? root.firstElementChild ?? document.body;
  if (!box.heValueTip) {
    box.heValueTip = el("span", { class: "he-tip he-value-tip", "aria-hidden": "true", hidden: "" });
    box.append(box.heValueTip);
  }
  return box.heValueTip;
}

/** Show `text` beside `node`. */
export function showTip(node, text) {
  const tip = tipOf(node);
  tip.textContent = text;
  tip.heFor = node;
  placeBeside(tip, node);
  // A focus moved by the keyboard scrolls its mark into view after the focus event: place it again once laid out.
  requestAnimationFrame(() => { if (tip.heFor === node && node.isConnected) placeBeside(tip, node); });
}

/** Hide the tip if it shows `node`'s value, unless `node` has the focus (`force`: it is losing it). */
export function hideTip(node, { force = false } = {}) {
  const tip = tipOf(node);
  if (tip.heFor !== node) return;
  if (!force && node.getRootNode().activeElement === node) return;
  tip.hidden = true;
  tip.heFor = null;
}

/**
 * One tab stop for `items` (roving tabindex): arrow keys move to the next or previous one, Home/End to the ends;
 * with `columns`, Up/Down move a row. Each item's own focus handler shows and announces its value.
 */
export function roving(items, { columns = 0 } = {}) {
  items = [...items].filter(Boolean);
  items.forEach((n, i) => {
    n.tabIndex = i ? -1 : 0;
    // A mark with no text of its own (a colour cell, a bar segment) is named by its value.
    if (!n.textContent.trim() && !n.hasAttribute("aria-label") && n.title) {
      n.setAttribute("role", "img");
      n.setAttribute("aria-label", n.title);
    }
    n.addEventListener("focus", () => { for (const m of items) m.tabIndex = m === n ? 0 : -1; });
    n.addEventListener("keydown", (e) => {
      const down = columns || 1;
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, ArrowDown: i + down, ArrowUp: i - down, Home: 0, End: items.length - 1 }[e.key];
      if (to == null) return;
      e.preventDefault();
      items[clamp(to, 0, items.length - 1)].focus();
    });
  });
  return items;
}
