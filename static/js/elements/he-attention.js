// <he-attention>: attention weights. Part 1: the prompt's (prefill) matrix for a chosen layer and head, first
// the head attention.default names (lib/attention-view.js): every weight for a prompt of up to 64 tokens (from
// .full, .default.full or a detail), else .blocks with a "full matrix" request (detail what=attention step=0).
// Part 2: each generated token's row over the cache, from step.attention (heads | mean, top_keys/top_weights).
import { SteppedElement, define, el, caption, showPiece, heat, fmt } from "../lib/base-element.js";
import { at } from "../lib/packed.js";
import { detailKey, requestFromServer } from "../run-view.js";
import { matrix, scroller, positionTexts, heatLegend } from "../lib/grid.js";
import { resolveIndex } from "../lib/choose.js";
import { FULL_TOKENS, decode, defaultHead, prefillMatrix } from "../lib/attention-view.js";

const q = (t) => JSON.stringify(t?.text ?? "");

function select(label, onChange) {
  const s = el("select", { "aria-label": label });
  s.addEventListener("change", onChange);
  return s;
}
function setOptions(sel, n, name, value) {
  const first = name === "layer" ? 1 : 0; // layers are numbered 1 … N everywhere on the page (L1 = the first block)
  if (sel.options.length !== n) sel.replaceChildren(...Array.from({ length: n }, (_, i) => el("option", { value: i }, `${name} ${i + first}`)));
  sel.value = String(Math.min(value, n - 1));
}

class HeAttention extends SteppedElement {
  #layer = 0;
  #head = 0;
  #ui = null;
  #asked = null; // the `layer` and `head` attributes last applied: the menus win until they change
  #shownFirst = null; // the prefill whose default head was last applied: a new run starts on its own

  /** An author's `layer` (from 1, as labelled) and `head` (from 0) attributes pick the prefill's matrix. */
  #applyAsked(pre) {
    const A = pre.attention;
    if (pre !== this.#shownFirst) {  // a new prompt: its default head, then the author's attributes over it
      this.#shownFirst = pre;
      const d = defaultHead(A);
      if (d) { this.#layer = d.layer; this.#head = d.head; }
      this.#asked = null;
    }
    const asked = `${this.getAttribute("layer")}:${this.getAttribute("head")}`;
    if (asked === this.#asked) return;
    this.#asked = asked;
    this.#layer = resolveIndex(this.getAttribute("layer"), A.layers, 1) ?? this.#layer;
    this.#head = resolveIndex(this.getAttribute("head"), A.heads, 0) ?? this.#head;
  }

  #skeleton() {
    if (this.#ui) return this.#ui;
    const redraw = () => this.data && this.render(this.data);
    const ui = {};
    // A short prompt is drawn in full: a head the prefill has no matrix for is fetched as soon as it is chosen
    // (not in an embed's replay, which has no session to ask: its button stays for the visitor to press).
    const fetchShort = () => this.data?.forkable !== false && this.data?.prefill?.tokens?.length <= FULL_TOKENS;
    const chosen = () => { redraw(); if (fetchShort() && !ui.full.hidden) ui.full.click(); };
    ui.layer = select("Layer", () => { this.#layer = Number(ui.layer.value); chosen(); });
    ui.head = select("Head", () => { this.#head = Number(ui.head.value); chosen(); });
    ui.full = el("button", { type: "button", class: "secondary" }, "Full matrix");
    ui.full.addEventListener("click", () => {
      if (ui.full.disabled) return;
      requestFromServer(this, { type: "detail", what: "attention", step: 0, layer: this.#layer, head: this.#head });
      ui.full.disabled = true;
      ui.full.textContent = "Requested…";
    });
    ui.stepLabel = el("output", { class: "he-step-label" });
    ui.prefill = el("div", { class: "he-part" });
    ui.steps = el("div", { class: "he-part" });
    const controls = el("div", { class: "he-controls" });
    const wrap = (text, ctl) => { const l = el("label", {}, text); l.append(ctl); return l; };
    controls.append(wrap("Layer ", ui.layer), wrap("Head ", ui.head), ui.full);
    const stepControls = el("div", { class: "he-controls" });
    stepControls.append(ui.stepLabel);
    ui.root = [el("h3", { class: "he-subhead" }, "The prompt, read all at once"), controls, ui.prefill,
      el("h3", { class: "he-subhead" }, "Each new token looks back over the cache"), stepControls, ui.steps];
    this.#ui = ui;
    return ui;
  }

  render(state) {
    const pre = state.prefill;
    if (!pre?.attention) { this.#ui = null; this.root.replaceChildren(el("p", { class: "he-empty" }, "Press play: attention weights appear here.")); return; }
    if (pre.attention.layers === 0) {  // a model without attention (Mamba, RWKV): say what it does instead
      const note = state.model?.absent_stages?.attention || "this model has no attention layers";
      this.#ui = null;
      this.dataset.layers = "0";
      this.root.replaceChildren(el("p", { class: "he-empty he-absent" }, `No attention to draw: ${note}.`));
      return;
    }
    const ui = this.#skeleton();
    if (!ui.root[0].isConnected) this.root.replaceChildren(...ui.root);
    const A = pre.attention;
    this.#applyAsked(pre);
    setOptions(ui.layer, A.layers, "layer", this.#layer);
    setOptions(ui.head, A.heads, "head", this.#head);
    this.#layer = Number(ui.layer.value);
    this.#head = Number(ui.head.value);
    this.#drawPrefill(state, ui);
    this.#drawStep(state, ui);
    const last = state.steps[state.steps.length - 1];
    this.dataset.layers = String(A.layers);
    this.dataset.heads = String(A.heads);
    this.dataset.layer = String(this.#layer + 1);  // as labelled
    this.dataset.head = String(this.#head);
    this.dataset.keys = String(last ? last.attention.keys : pre.tokens.length);  // keys the newest query saw
  }

  #drawPrefill(state, ui) {
    const pre = state.prefill, A = pre.attention, L = this.#layer, H = this.#head;
    const tokens = pre.tokens || [];
    const detail = state.details?.[detailKey({ what: "attention", step: 0, layer: L, head: H })];
    const m = prefillMatrix(A, tokens, detail, L, H, showPiece);
    ui.full.hidden = !m.blocks;
    if (!ui.full.hidden && ui.full.dataset.key !== `${L}:${H}`) { ui.full.dataset.key = `${L}:${H}`; ui.full.disabled = false; ui.full.textContent = "Full matrix"; }
    const n = m.labels.length;
    let max = 0;
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (!m.masked(r, c)) max = Math.max(max, m.weight(r, c) || 0);
    const grid = matrix({
      label: `Attention weights, layer ${L + 1} head ${H}`, corner: "query ↓ key →", rows: m.labels, cols: m.labels,
      rowTitle: (r) => `query ${m.title(r)}`, colTitle: (c) => `key ${m.title(c)}`,
      cell: (r, c) => {
        // Masked: no weight at all (a later position), drawn apart from a weight of 0 (elements.css .masked).
        if (m.masked(r, c)) return { cls: "masked", title: `query ${m.title(r)} → key ${m.title(c)}: masked (later position${m.blocks ? "s" : ""})` };
        const w = m.weight(r, c);
        return { background: heat(max ? w / max : 0), title: `layer ${L + 1} head ${H}: query ${m.title(r)} → key ${m.title(c)}: weight ${fmt(w, 4)}` };
      },
    });
    ui.prefill.replaceChildren(heatLegend(heat, max, "attention weight"), scroller(grid), caption(this.#prefillCaption(A, tokens.length, m, max)));
    ui.prefill.dataset.view = m.source;  // sent | default | detail | blocks: where the drawn weights came from
  }

  /** What the matrix shows, why this head is shown first, and where the last query looks. */
  #prefillCaption(A, P, m, max) {
    const L = this.#layer, H = this.#head, d = defaultHead(A);
    const last = m.labels.map((_, c) => (m.masked(m.labels.length - 1, c) ? 0 : m.weight(m.labels.length - 1, c)));
    const best = last.indexOf(Math.max(...last));
    const why = d && d.layer === L && d.head === H
      ? `Layer ${L + 1}, head ${H} is shown first: ${d.rule} (of all ${A.layers * A.heads} heads, its queries give ` +
        `the first ${d.rule.includes("block") ? "block" : "token"} the least weight, ${fmt(d.first_token_weight, 3)} on average). `
      : "";
    return `Measured on this run: layer ${L + 1}, head ${H} over the ${P}-token prompt (${m.note}). ${why}` +
      `The last ${m.blocks ? "block" : "position"} puts its largest weight, ${fmt(last[best], 3)}, on ${m.blocks ? "" : "key "}${m.title(best)}. ` +
      `Colour scaled to the largest weight here, ${fmt(max, 3)}; hatched cells are masked (no weight: later positions); hover a cell for its weight.`;
  }

  #drawStep(state, ui) {
    const n = state.steps.length;
    if (!n) { ui.stepLabel.value = "no steps yet"; ui.steps.replaceChildren(el("p", { class: "he-empty" }, "No token generated yet.")); return; }
    const k = this.step(n);
    if (!k) { ui.stepLabel.value = `the prefill (step 0 of ${n})`; ui.steps.replaceChildren(el("p", { class: "he-empty" }, "The page's step is the prefill: move the step bar to a generated token.")); return; }
    const step = state.steps[k - 1];
    ui.stepLabel.value = `step ${k} of ${n}`;
    const A = step.attention, K = A.keys;
    if (!A.mean) { // the first paint's light example file: the whole file, with these rows, comes at the first scroll
      ui.steps.replaceChildren(el("p", { class: "he-empty" }, `At step ${k} the new query read ${K} cached keys in each layer; their weights are loading.`));
      return;
    }
    const mean = decode(A.mean);
    const L = Math.min(this.#layer, mean.shape[0] - 1);
    const texts = positionTexts(state);
    const key = (c) => `position ${c} ${q(texts[c])}${texts[c] && texts[c].source !== "prompt" ? ` (from ${texts[c].source})` : ""}`;
    const query = `${q(step.input)} at position ${step.input.position}`;
    const heads = A.mode === "heads" ? decode(A.heads) : null;
    const H = heads ? heads.shape[1] : 0;
    const rowNames = [...Array.from({ length: H }, (_, h) => `head ${h}`), "mean"];
    const value = (r, c) => (r < H ? at(heads, L, r, c) : at(mean, L, c));
    let max = 0;
    for (let r = 0; r < rowNames.length; r++) for (let c = 0; c < K; c++) max = Math.max(max, value(r, c) || 0);
    const grid = matrix({
      label: `Step ${k} attention, layer ${L + 1}`, corner: `layer ${L + 1}`, rows: rowNames,
      cols: Array.from({ length: K }, (_, c) => showPiece(texts[c]?.text ?? `#${c}`)),
      colTitle: (c) => `key ${key(c)}`,
      cell: (r, c) => ({
        cls: r === H ? "mean-row" : "",
        background: heat(max ? value(r, c) / max : 0),
        title: `step ${k}, layer ${L + 1}, ${rowNames[r]}: query ${query} → key ${key(c)}: weight ${fmt(value(r, c), 4)}`,
      }),
    });
    const parts = [heatLegend(heat, max, "attention weight"), scroller(grid)];
    if (!heads) parts.push(this.#topList(A, L, texts));
    const meanRow = Array.from({ length: K }, (_, c) => at(mean, L, c));
    const sum = meanRow.reduce((a, b) => a + b, 0);
    const best = meanRow.indexOf(Math.max(...meanRow));
    parts.push(caption(
      `Measured on this run: at step ${k} the query for ${query} (a ${step.forward} pass) reads ${K} cached keys in layer ${L + 1}` +
      `${heads ? ` across ${H} heads` : " (mean over heads; per-head strongest keys listed)"}. ` +
      `Averaged over heads its largest weight is ${fmt(meanRow[best], 3)} on ${key(best)}; the averaged row sums to ${fmt(sum, 3)}. Hover a cell for its weight.`,
    ));
    ui.steps.replaceChildren(...parts);
  }

  #topList(A, L, texts) {
    const list = el("ol", { class: "he-toplist", start: 0, "aria-label": "Strongest keys per head" });
    (A.top_keys?.[L] || []).forEach((keys, h) => {
      const item = el("li", {});
      item.append(el("span", { class: "head" }, `head ${h}: `));
      keys.forEach((c, i) => {
        const w = A.top_weights?.[L]?.[h]?.[i];
        item.append(el("span", { class: "he-chip small", title: `head ${h} → position ${c} ${q(texts[c])}: weight ${fmt(w, 4)}` },
          `${showPiece(texts[c]?.text ?? `#${c}`)} ${fmt(w, 2)}`));
      });
      list.append(item);
    });
    return list;
  }
}

define("he-attention", HeAttention);
