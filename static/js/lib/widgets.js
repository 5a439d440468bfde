// Small helpers the step diagrams share: step picker, hover readout, token chips, number formats.
import { el, showPiece } from "./base-element.js";

/** A probability as a percentage, with more digits for small ones. */
export function pct(p) {
  if (p == null || !Number.isFinite(p)) return "–";
  const v = p * 100;
  return `${v >= 10 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v.toFixed(3)}%`;
}

/** An integer with thousands separators. */
export function int(n) { return n == null ? "–" : Number(n).toLocaleString("en-US"); }

/** The line that shows the value under the pointer (tap works too, where there is no hover). */
export function readout(hint = "Hover or tap a bar to read its exact values.") {
  const node = el("p", { class: "heb-readout", "aria-live": "polite" }, hint);
  node.dataset.hint = hint;
  return node;
}

/** Give `node` a hover value: a native tooltip and the readout line. */
export function hover(node, text, line, focusable = true) {
  node.title = text;
  if (focusable && node.tabIndex < 0) node.tabIndex = 0;
  const show = () => { if (line) line.textContent = text; };
  node.addEventListener("pointerenter", show);
  node.addEventListener("focus", show);
  node.addEventListener("click", show);
  return node;
}

/** A token piece as visible text (never markup), with its id. */
export function chip(text, id, cls = "") {
  const node = el("span", { class: `heb-chip ${cls}`.trim(), "data-id": id });
  node.append(el("span", { class: "heb-piece" }, showPiece(text ?? "")));
  if (id != null) node.append(el("span", { class: "heb-id" }, id));
  return node;
}

/** id → piece text from whatever lists of the step carry text. */
export function textsOf(...lists) {
  const map = new Map();
  for (const list of lists) for (const t of list || []) if (t && t.text != null) map.set(t.id, t.text);
  return map;
}

/** Highlight every node with the same data-id inside `root` while one of them is hovered. */
export function linkIds(root) {
  root.addEventListener("pointerover", (e) => {
    const id = e.target.closest?.("[data-id]")?.dataset.id;
    for (const n of root.querySelectorAll(".heb-linked")) n.classList.remove("heb-linked");
    if (id != null) for (const n of root.querySelectorAll(`[data-id="${CSS.escape(id)}"]`)) n.classList.add("heb-linked");
  });
}

/** A small step picker: a range over 1 … steps, following the latest step unless moved back. */
export class StepPicker {
  constructor(onChange) {
    this.selected = null; // null: follow the latest step
    this.range = el("input", { type: "range", min: "1", max: "1", step: "1", value: "1", "aria-label": "step to show" });
    this.out = el("output", { class: "heb-picker-out" });
    this.latest = el("button", { type: "button", class: "heb-picker-latest" }, "latest");
    this.node = el("div", { class: "heb-picker" });
    this.node.append(el("span", { class: "heb-picker-label" }, "Step"), this.range, this.out, this.latest);
    this.range.addEventListener("input", () => {
      const v = Number(this.range.value);
      this.selected = v >= Number(this.range.max) ? null : v;
      onChange();
    });
    this.latest.addEventListener("click", () => { this.selected = null; onChange(); });
  }

  /** The 1-based step to show out of `count` (0 when there is none yet). */
  pick(count) {
    const n = this.selected == null ? count : Math.min(this.selected, count);
    this.range.max = String(Math.max(count, 1));
    this.range.value = String(Math.max(n, 1));
    this.range.disabled = count <= 1;
    this.out.textContent = count ? `${n} of ${count}${n === count ? " (latest)" : ""}` : "prefill only";
    this.latest.hidden = n === count;
    return n;
  }
}

/** Mount persistent controls above a body that each render replaces; returns the body. */
export function mount(host, ...controls) {
  if (!host.hebBody) {
    host.hebBody = el("div", { class: "heb-body" });
    host.replaceChildren(...controls, host.hebBody);
  }
  return host.hebBody;
}
