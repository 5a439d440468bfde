// <he-logits>: the LM head's top candidates for one step, as raw logits with their probabilities.
// Also exports the small helpers the other "b" diagrams share (step picker, hover readout, chips).
import { HeElement, el, caption, showPiece, fmt } from "../lib/base-element.js";

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

class HeLogits extends HeElement {
  render(rs) {
    this.picker ??= new StepPicker(() => this.render(this.data));
    const body = mount(this, this.picker.node);
    const n = this.picker.pick(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    const logits = step ? step.logits : rs.prefill?.logits;
    if (!logits) { delete this.dataset.topId; delete this.dataset.vocabSize; body.replaceChildren(caption("Waiting for the run: no logits yet.")); return; }
    const top = logits.top;
    this.dataset.topId = top.length ? String(top[0].id) : "";
    this.dataset.vocabSize = String(logits.vocab_size);
    this.dataset.step = String(n);

    const line = readout();
    const lo = Math.min(0, ...top.map((t) => t.logit));
    const hi = Math.max(0, ...top.map((t) => t.logit));
    const span = hi - lo || 1;
    const zero = (-lo / span) * 100;
    const chart = el("div", { class: "heb-logits", role: "list" });
    const chosen = step?.token?.id;
    top.forEach((t, i) => {
      const row = el("div", { class: `heb-lrow${t.id === chosen ? " heb-chosen" : ""}`, role: "listitem" });
      const track = el("div", { class: "heb-ltrack" });
      const left = t.logit >= 0 ? zero : zero - (-t.logit / span) * 100;
      const bar = el("div", { class: `heb-lbar${t.logit < 0 ? " heb-neg" : ""}`,
        style: `left:${left}%;width:${(Math.abs(t.logit) / span) * 100}%` });
      const pbar = el("div", { class: "heb-pbar", style: `width:${t.prob * 100}%` });
      track.append(bar, pbar);
      if (lo < 0) track.append(el("div", { class: "heb-zero", style: `left:${zero}%` }));
      row.append(chip(t.text, t.id), track,
        el("span", { class: "heb-lval" }, `${fmt(t.logit, 2)} · ${pct(t.prob)}`));
      hover(row, `#${i + 1} ${showPiece(t.text)} (id ${t.id}): raw logit ${t.logit}, softmax of raw logits ${pct(t.prob)}`
        + (t.id === chosen ? " (the token this step chose)" : ""), line);
      chart.append(row);
    });

    const shownMass = top.reduce((a, t) => a + t.prob, 0);
    const where = step ? `Step ${n} (${step.forward} forward pass, position ${step.input.position})` : "The prefill";
    const legend = el("p", { class: "heb-legend" });
    legend.append(el("span", { class: "heb-key heb-key-logit" }), " raw logit  ",
      el("span", { class: "heb-key heb-key-prob" }), " probability (softmax of the raw logits, before temperature and filters)");
    body.replaceChildren(
      el("p", { class: "heb-big" }, `one score for each of ${int(logits.vocab_size)} tokens`),
      legend, chart, line,
      caption(`${where}: the LM head produced ${int(logits.vocab_size)} logits, one for each token of the vocabulary. `
        + `The ${top.length} highest are shown, sorted by raw logit; together they hold ${pct(shownMass)} of the probability. `
        + (top.some((t) => t.id === chosen) ? `Outlined: the token this step chose (id ${chosen}).`
          : chosen != null ? `This step chose id ${chosen}, outside these ${top.length}.` : "")),
    );
  }
}

customElements.define("he-logits", HeLogits);
