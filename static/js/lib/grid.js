// A labelled grid of coloured cells (mask, attention, hidden norms): DOM cells with title attributes,
// so every value has a hover text and model text stays text. Layout lives in elements.css (.he-matrix).
// One tab stop per grid (roving tabindex): arrow keys, Home/End and PageUp/PageDown move a visible cursor;
// the value shows next to the cell (hover, tap or keyboard) and is announced by an aria-live readout.
import { el } from "./base-element.js";
import { placeBeside } from "./pointer.js";
import { decimal, fill, gettext } from "./i18n.js";

/**
 * rows/cols: arrays of label strings (already made visible with showPiece);
 * cell(r, c) -> {background, title, cls} or null for an empty cell.
 * rowTitle/colTitle(i) give the labels' hover text.
 */
export function matrix({ rows, cols, cell, rowTitle, colTitle, corner = "", label = "", onCell }) {
  const grid = el("div", {
    class: "he-matrix", role: "grid", "aria-label": label,
    style: `--cols:${cols.length}; --rows:${rows.length}`,
  });
  const head = el("div", { class: "he-matrix-row head", role: "row" });
  head.append(el("span", { class: "corner", role: "columnheader" }, corner));
  cols.forEach((text, c) => head.append(el("span", { class: "col-label", role: "columnheader", title: colTitle?.(c) ?? text }, text)));
  grid.append(head);
  const cells = []; // [row][col]
  rows.forEach((text, r) => {
    const line = el("div", { class: "he-matrix-row", role: "row" });
    line.append(el("span", { class: "row-label", role: "rowheader", title: rowTitle?.(r) ?? text }, text));
    cells.push([]);
    for (let c = 0; c < cols.length; c++) {
      const spec = cell(r, c);
      const node = el("span", {
        class: `he-cell${spec?.cls ? ` ${spec.cls}` : ""}`, role: "gridcell", tabindex: "-1",
        title: spec?.title ?? null, "aria-label": spec?.title ?? gettext("empty"), style: spec?.background ? `background:${spec.background}` : null,
      });
      node.dataset.r = String(r);
      node.dataset.c = String(c);
      if (onCell) node.addEventListener("click", () => onCell(r, c));
      line.append(node);
      cells[r].push(node);
    }
    grid.append(line);
  });
  if (cells[0]?.[0]) cells[0][0].tabIndex = 0;
  bindPointer(grid, cells);
  return grid;
}

/** The value box next to a cell and the aria-live readout, moved by pointer and keys. */
function bindPointer(grid, cells) {
  // Both live beside the grid (scroller() places them): a grid's children are rows only.
  const tip = el("span", { class: "he-tip", "aria-hidden": "true", hidden: "" });
  const live = el("span", { class: "he-sr-only he-grid-readout", "aria-live": "polite" });
  grid.heParts = [tip, live];
  const empty = gettext("empty"); // in the language the grid was drawn in
  let current = cells[0]?.[0];
  const show = (node, announce) => {
    if (!tip.isConnected) grid.after(tip, live);
    tip.textContent = node.getAttribute("title") || empty;
    placeBeside(tip, node); // within the scroll box and the viewport
    if (announce) live.textContent = tip.textContent;
  };
  const move = (node) => {
    if (!node) return;
    if (current) current.tabIndex = -1;
    current = node;
    node.tabIndex = 0;
    node.focus();
    show(node, true);
  };
  grid.addEventListener("pointerover", (e) => { const n = e.target.closest?.(".he-cell"); if (n) show(n, false); });
  // Inside a shadow root the document's activeElement is the host: ask the grid's own root.
  grid.addEventListener("pointerleave", () => { if (!grid.contains(grid.getRootNode().activeElement)) tip.hidden = true; });
  grid.addEventListener("click", (e) => { const n = e.target.closest?.(".he-cell"); if (n) move(n); });
  grid.addEventListener("focusin", (e) => { if (e.target.classList?.contains("he-cell")) show(e.target, true); });
  grid.addEventListener("focusout", (e) => { if (!grid.contains(e.relatedTarget)) tip.hidden = true; });
  grid.addEventListener("keydown", (e) => {
    if (!current) return;
    const r = Number(current.dataset.r), c = Number(current.dataset.c);
    const last = cells[r].length - 1, bottom = cells.length - 1;
    const to = { ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1], ArrowUp: [r - 1, c], ArrowDown: [r + 1, c],
      Home: [r, 0], End: [r, last], PageUp: [0, c], PageDown: [bottom, c] }[e.key];
    if (!to) return;
    e.preventDefault();
    move(cells[Math.max(0, Math.min(bottom, to[0]))]?.[Math.max(0, Math.min(last, to[1]))]);
  });
}

/** The text alternative: the same values as a table, built when the visitor opens it. */
function tableAlternative(grid) {
  const box = el("details", { class: "he-table-alt" });
  box.append(el("summary", {}, gettext("Show as table")));
  const words = { values: gettext("values"), region: gettext("values as a table") }; // the grid's language, not the toggle's
  box.addEventListener("toggle", () => {
    if (!box.open || box.querySelector("table")) return;
    const table = el("table", {});
    table.append(el("caption", {}, grid.getAttribute("aria-label") || words.values));
    for (const line of grid.querySelectorAll(".he-matrix-row")) {
      const tr = el("tr", {});
      for (const node of line.children) {
        const header = !node.classList.contains("he-cell");
        const text = header ? (node.getAttribute("title") || node.textContent) : (node.getAttribute("title") || "");
        tr.append(el(header ? "th" : "td", header ? { scope: line.classList.contains("head") ? "col" : "row" } : {}, text));
      }
      table.append(tr);
    }
    const scroll = el("div", { class: "he-scroll tall", tabindex: "0", role: "region", "aria-label": words.region });
    scroll.append(table);
    box.append(scroll);
  });
  return box;
}

/** A colour scale: swatches of heat(0…1) labelled with the values they stand for. */
export function heatLegend(heat, max, label, format = (v) => decimal(v, 3)) {
  const box = el("div", { class: "he-heat-legend", role: "img",
    "aria-label": fill(gettext("%(label)s: pale is 0, dark is %(max)s"), { label, max: format(max) }) });
  box.append(el("span", { class: "he-heat-label" }, fill(gettext("%(label)s:"), { label })));
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const item = el("span", { class: "he-heat-step" });
    item.append(el("span", { class: "swatch he-heat-swatch", style: `background:${heat(f)}` }), el("span", {}, format(f * max)));
    box.append(item);
  }
  return box;
}

/** A horizontally scrolling wrapper (wide grids stay readable at phone width); a heatmap gets its table. */
export function scroller(child, extra = "") {
  const box = el("div", { class: `he-scroll${extra ? ` ${extra}` : ""}` });
  box.append(child);
  if (!child.classList?.contains("he-matrix")) {
    // Keyboard users can scroll it too (WCAG scrollable-region-focusable); a heatmap's cells are focusable.
    Object.assign(box, { tabIndex: 0 });
    box.setAttribute("role", "region");
    box.setAttribute("aria-label", child.getAttribute?.("aria-label") || gettext("scrollable diagram"));
    return box;
  }
  box.append(...(child.heParts || []));
  const wrap = el("div", { class: "he-grid-wrap" });
  wrap.append(box, tableAlternative(child));
  return wrap;
}

/**
 * A translated sentence whose `%(name)s` placeholders take strings or nodes (a <strong> inside the sentence):
 * the parts to append, in the translation's own word order.
 */
export function fillParts(text, values) {
  const parts = [];
  for (const part of text.split(/(%\(\w+\)s)/)) {
    const name = /^%\((\w+)\)s$/.exec(part)?.[1];
    const value = name ? values[name] ?? "" : part;
    if (typeof value === "object") parts.push(value);
    else if (typeof parts[parts.length - 1] === "string") parts[parts.length - 1] += String(value);
    else if (value !== "") parts.push(String(value));
  }
  return parts;
}

/** Labels for cache positions: prompt tokens, then the tokens generated by steps 1, 2, … */
export function positionTexts(state) {
  const out = (state.prefill?.tokens || []).map((t) => ({ id: t.id, text: t.text, special: t.special, source: "prompt" }));
  for (const s of state.steps) out.push({ id: s.token.id, text: s.token.text, special: s.token.special, source: `step ${s.step}` });
  return out;
}

/** id → text for every token the run has named (prompt, generated, top logits, final probs). */
export function knownPieces(state) {
  const map = new Map();
  for (const t of state.prefill?.tokens || []) map.set(t.id, t.text);
  for (const t of state.prefill?.logits?.top || []) map.set(t.id, t.text);
  for (const s of state.steps) {
    map.set(s.token.id, s.token.text);
    for (const t of s.logits?.top || []) map.set(t.id, t.text);
    for (const t of s.probs || []) map.set(t.id, t.text);
  }
  return map;
}
