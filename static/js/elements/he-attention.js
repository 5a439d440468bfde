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
import { fill, gettext, gettext_noop, sentences } from "../lib/i18n.js";

const q = (t) => JSON.stringify(t?.text ?? "");
/** A step's forward pass (step.forward), named in the reader's language where it is shown. */
const PASS = { prefill: gettext_noop("prefill"), decode: gettext_noop("decode") };

function select(label, onChange) {
  const s = el("select", { "aria-label": label });
  s.addEventListener("change", onChange);
  return s;
}
function setOptions(sel, n, name, value) {
  const first = name === "layer" ? 1 : 0; // layers are numbered 1 … N everywhere on the page (L1 = the first block)
  const text = name === "layer" ? gettext("layer %(n)s") : gettext("head %(n)s");
  if (sel.options.length !== n) sel.replaceChildren(...Array.from({ length: n }, (_, i) => el("option", { value: i }, fill(text, { n: i + first }))));
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
    ui.layer = select(gettext("Layer"), () => { this.#layer = Number(ui.layer.value); chosen(); });
    ui.head = select(gettext("Head"), () => { this.#head = Number(ui.head.value); chosen(); });
    ui.full = el("button", { type: "button", class: "secondary" }, gettext("Full matrix"));
    ui.full.addEventListener("click", () => {
      if (ui.full.disabled) return;
      requestFromServer(this, { type: "detail", what: "attention", step: 0, layer: this.#layer, head: this.#head });
      ui.full.disabled = true;
      ui.full.textContent = gettext("Requested…");
    });
    ui.stepLabel = el("output", { class: "he-step-label" });
    ui.prefill = el("div", { class: "he-part" });
    ui.steps = el("div", { class: "he-part" });
    const controls = el("div", { class: "he-controls" });
    const wrap = (text, ctl) => { const l = el("label", {}, text); l.append(ctl); return l; };
    controls.append(wrap(`${gettext("Layer")} `, ui.layer), wrap(`${gettext("Head")} `, ui.head), ui.full);
    const stepControls = el("div", { class: "he-controls" });
    stepControls.append(ui.stepLabel);
    ui.root = [el("h3", { class: "he-subhead" }, gettext("The prompt, read all at once")), controls, ui.prefill,
      el("h3", { class: "he-subhead" }, gettext("Each new token looks back over the cache")), stepControls, ui.steps];
    this.#ui = ui;
    return ui;
  }

  render(state) {
    const pre = state.prefill;
    if (!pre?.attention) { this.#ui = null; this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: attention weights appear here."))); return; }
    if (pre.attention.layers === 0) {  // a model without attention (Mamba, RWKV): say what it does instead
      // The server's note (model.absent_stages.attention) is recorded in English: the same sentence, said here.
      const note = gettext("this model has no attention layers: its layers mix tokens with a recurrence or convolution "
        + "(state-space / linear layers) instead");
      this.#ui = null;
      this.dataset.layers = "0";
      this.root.replaceChildren(el("p", { class: "he-empty he-absent" }, fill(gettext("No attention to draw: %(note)s."), { note })));
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
    if (!ui.full.hidden && ui.full.dataset.key !== `${L}:${H}`) { ui.full.dataset.key = `${L}:${H}`; ui.full.disabled = false; ui.full.textContent = gettext("Full matrix"); }
    const n = m.labels.length;
    let max = 0;
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (!m.masked(r, c)) max = Math.max(max, m.weight(r, c) || 0);
    const grid = matrix({
      label: fill(gettext("Attention weights, layer %(layer)s head %(head)s"), { layer: L + 1, head: H }), corner: gettext("query ↓ key →"),
      rows: m.labels, cols: m.labels,
      rowTitle: (r) => fill(gettext("query %(query)s"), { query: m.title(r) }), colTitle: (c) => fill(gettext("key %(key)s"), { key: m.title(c) }),
      cell: (r, c) => {
        // Masked: no weight at all (a later position), drawn apart from a weight of 0 (elements.css .masked).
        if (m.masked(r, c)) {
          const masked = m.blocks ? gettext("query %(query)s → key %(key)s: masked (later positions)") : gettext("query %(query)s → key %(key)s: masked (later position)");
          return { cls: "masked", title: fill(masked, { query: m.title(r), key: m.title(c) }) };
        }
        const w = m.weight(r, c);
        return { background: heat(max ? w / max : 0), title: fill(gettext("layer %(layer)s head %(head)s: query %(query)s → key %(key)s: weight %(weight)s"),
          { layer: L + 1, head: H, query: m.title(r), key: m.title(c), weight: fmt(w, 4) }) };
      },
    });
    ui.prefill.replaceChildren(heatLegend(heat, max, gettext("attention weight")), scroller(grid), caption(this.#prefillCaption(A, tokens.length, m, max)));
    ui.prefill.dataset.view = m.source;  // sent | default | detail | blocks: where the drawn weights came from
  }

  /** What the matrix shows, why this head is shown first, and where the last query looks. */
  #prefillCaption(A, P, m, max) {
    const L = this.#layer, H = this.#head, d = defaultHead(A);
    const last = m.labels.map((_, c) => (m.masked(m.labels.length - 1, c) ? 0 : m.weight(m.labels.length - 1, c)));
    const best = last.indexOf(Math.max(...last));
    const why = d && d.layer === L && d.head === H
      ? fill(d.rule.includes("block")
        ? gettext("Layer %(layer)s, head %(head)s is shown first: %(rule)s (of all %(heads)s heads, its queries give the first block the least weight, %(weight)s on average).")
        : gettext("Layer %(layer)s, head %(head)s is shown first: %(rule)s (of all %(heads)s heads, its queries give the first token the least weight, %(weight)s on average)."),
      { layer: L + 1, head: H, rule: gettext(d.rule), heads: A.layers * A.heads, weight: fmt(d.first_token_weight, 3) })
      : "";
    const lastLine = m.blocks ? gettext("The last block puts its largest weight, %(weight)s, on %(key)s.")
      : gettext("The last position puts its largest weight, %(weight)s, on key %(key)s.");
    return sentences([
      fill(gettext("Measured on this run: layer %(layer)s, head %(head)s over the %(count)s-token prompt (%(note)s)."), { layer: L + 1, head: H, count: P, note: m.note }),
      why,
      fill(lastLine, { weight: fmt(last[best], 3), key: m.title(best) }),
      fill(gettext("Colour scaled to the largest weight here, %(max)s; hatched cells are masked (no weight: later positions); hover a cell for its weight."), { max: fmt(max, 3) }),
    ].filter(Boolean));
  }

  #drawStep(state, ui) {
    const n = state.steps.length;
    if (!n) { ui.stepLabel.value = gettext("no steps yet"); ui.steps.replaceChildren(el("p", { class: "he-empty" }, gettext("No token generated yet."))); return; }
    const k = this.step(n);
    if (!k) {
      ui.stepLabel.value = fill(gettext("the prefill (step 0 of %(count)s)"), { count: n });
      ui.steps.replaceChildren(el("p", { class: "he-empty" }, gettext("The page's step is the prefill: move the step bar to a generated token.")));
      return;
    }
    const step = state.steps[k - 1];
    ui.stepLabel.value = fill(gettext("step %(step)s of %(count)s"), { step: k, count: n });
    const A = step.attention, K = A.keys;
    if (!A.mean) { // the first paint's light example file: the whole file, with these rows, comes at the first scroll
      ui.steps.replaceChildren(el("p", { class: "he-empty" },
        fill(gettext("At step %(step)s the new query read %(keys)s cached keys in each layer; their weights are loading."), { step: k, keys: K })));
      return;
    }
    const mean = decode(A.mean);
    const L = Math.min(this.#layer, mean.shape[0] - 1);
    const texts = positionTexts(state);
    const P = texts.length - state.steps.length;  // positionTexts: the prompt's tokens, then one per step
    const key = (c) => (texts[c] && texts[c].source !== "prompt"
      ? fill(gettext("position %(position)s %(text)s (from step %(step)s)"), { position: c, text: q(texts[c]), step: state.steps[c - P]?.step })
      : fill(gettext("position %(position)s %(text)s"), { position: c, text: q(texts[c]) }));
    const query = fill(gettext("%(text)s at position %(position)s"), { text: q(step.input), position: step.input.position });
    const heads = A.mode === "heads" ? decode(A.heads) : null;
    const H = heads ? heads.shape[1] : 0;
    const rowNames = [...Array.from({ length: H }, (_, h) => fill(gettext("head %(n)s"), { n: h })), gettext("mean")];
    const value = (r, c) => (r < H ? at(heads, L, r, c) : at(mean, L, c));
    let max = 0;
    for (let r = 0; r < rowNames.length; r++) for (let c = 0; c < K; c++) max = Math.max(max, value(r, c) || 0);
    const grid = matrix({
      label: fill(gettext("Step %(step)s attention, layer %(layer)s"), { step: k, layer: L + 1 }), corner: fill(gettext("layer %(n)s"), { n: L + 1 }), rows: rowNames,
      cols: Array.from({ length: K }, (_, c) => showPiece(texts[c]?.text ?? `#${c}`)),
      colTitle: (c) => fill(gettext("key %(key)s"), { key: key(c) }),
      cell: (r, c) => ({
        cls: r === H ? "mean-row" : "",
        background: heat(max ? value(r, c) / max : 0),
        title: fill(gettext("step %(step)s, layer %(layer)s, %(row)s: query %(query)s → key %(key)s: weight %(weight)s"),
          { step: k, layer: L + 1, row: rowNames[r], query, key: key(c), weight: fmt(value(r, c), 4) }),
      }),
    });
    const parts = [heatLegend(heat, max, gettext("attention weight")), scroller(grid)];
    if (!heads) parts.push(this.#topList(A, L, texts));
    const meanRow = Array.from({ length: K }, (_, c) => at(mean, L, c));
    const sum = meanRow.reduce((a, b) => a + b, 0);
    const best = meanRow.indexOf(Math.max(...meanRow));
    const reads = heads
      ? gettext("Measured on this run: at step %(step)s the query for %(query)s (a %(forward)s pass) reads %(keys)s cached keys in layer %(layer)s across %(heads)s heads.")
      : gettext("Measured on this run: at step %(step)s the query for %(query)s (a %(forward)s pass) reads %(keys)s cached keys in layer %(layer)s (mean over heads; per-head strongest keys listed).");
    const forward = PASS[step.forward] ? gettext(PASS[step.forward]) : step.forward;
    parts.push(caption(sentences([
      fill(reads, { step: k, query, forward, keys: K, layer: L + 1, heads: H }),
      fill(gettext("Averaged over heads its largest weight is %(weight)s on %(key)s; the averaged row sums to %(sum)s."), { weight: fmt(meanRow[best], 3), key: key(best), sum: fmt(sum, 3) }),
      gettext("Hover a cell for its weight."),
    ])));
    ui.steps.replaceChildren(...parts);
  }

  #topList(A, L, texts) {
    const list = el("ol", { class: "he-toplist", start: 0, "aria-label": gettext("Strongest keys per head") });
    (A.top_keys?.[L] || []).forEach((keys, h) => {
      const item = el("li", {});
      item.append(el("span", { class: "head" }, `${fill(gettext("head %(n)s:"), { n: h })} `));
      keys.forEach((c, i) => {
        const w = A.top_weights?.[L]?.[h]?.[i];
        const title = fill(gettext("head %(head)s → position %(position)s %(text)s: weight %(weight)s"), { head: h, position: c, text: q(texts[c]), weight: fmt(w, 4) });
        item.append(el("span", { class: "he-chip small", title },
          `${showPiece(texts[c]?.text ?? `#${c}`)} ${fmt(w, 2)}`));
      });
      list.append(item);
    });
    return list;
  }
}

define("he-attention", HeAttention);
