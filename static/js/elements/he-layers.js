// <he-layers>: the residual stream through depth. Hidden-state norms per position and layer
// (prefill.hidden_norms packed (layers + 1, P), then step.hidden_norms for each generated position),
// and the logit lens (prefill.lens / step.lens: [{layer, ids, probs, texts}]) as a table.
import { SteppedElement, define, el, caption, showPiece, heat, fmt } from "../lib/base-element.js";
import { unpack, at } from "../lib/packed.js";
import { matrix, scroller, knownPieces } from "../lib/grid.js";
import { detailKey, requestFromServer } from "../run-view.js";
import { resolveIndex } from "../lib/choose.js";
import { readout, hover } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { fill, gettext, grouped, ngettext, sentences } from "../lib/i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs = {}, text) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
};
const depthName = (i) => (i === 0 ? gettext("input (embeddings)") : fill(gettext("after layer %(n)s"), { n: i }));
/** A counted noun phrase (ngettext's choice) with its number filled in: "1 layer", "30 layers". */
const counted = (text, n) => fill(text, { n: n == null ? "–" : grouped(n) });
const layerCount = (n) => counted(ngettext("%(n)s layer", "%(n)s layers", n), n);

/** A norm's hover text: where it was read and its value. */
const normTitle = (name, depth, v) => fill(gettext("%(name)s, %(depth)s: norm %(norm)s"), { name, depth, norm: fmt(v, 3) });

const LENS_AFTER_MS = 400; // a step shown this long (not scrubbed past) gets its whole lens

class HeLayers extends SteppedElement {
  #asked = new WeakSet(); // the step (or prefill) payloads whose whole lens this element asked for: a fork's are new
  #lensTimer = 0;
  #col = null;  // a column the visitor clicked (null: the column of the page's step)
  #colAt = null; // the page step it was clicked at: moving the step bar goes back to following it

  render(state) {
    const pre = state.prefill;
    if (!pre?.hidden_norms) { this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: the residual stream through the layers appears here."))); return; }
    this.dataset.depth = String(pre.hidden_norms.shape[0]);
    this.dataset.positions = String(pre.tokens.length + state.steps.length);
    this.root.replaceChildren(el("h3", { class: "he-subhead" }, gettext("How large the vector gets, layer by layer")), ...this.#norms(state),
      el("h3", { class: "he-subhead" }, gettext("What each layer would predict (logit lens)")), ...this.#lensTable(state));
  }

  #norms(state) {
    const pre = state.prefill;
    const norms = unpack(pre.hidden_norms);
    const [depth, P] = norms.shape;
    const cols = [];
    for (let p = 0; p < P; p++) cols.push({ pos: p, text: pre.tokens[p]?.text ?? "", values: Array.from({ length: depth }, (_, i) => at(norms, i, p)), step: null });
    const k = this.step(state.steps.length);
    for (const s of state.steps.slice(0, k)) { // the positions read up to the page's step: none from later steps
      if (s.input.position < P || !Array.isArray(s.hidden_norms)) continue;
      cols.push({ pos: s.input.position, text: s.input.text, values: s.hidden_norms, step: s.step });
    }
    if (this.#colAt !== k) this.#col = null;
    const input = k ? state.steps[k - 1].input.position : P - 1; // the position step k read
    const follow = Math.max(0, cols.findIndex((c) => c.pos === input));
    const sel = this.#col == null || this.#col >= cols.length ? follow : this.#col;
    const colMax = cols.map((c) => Math.max(...c.values.filter(Number.isFinite)));
    const name = (c) => fill(cols[c].step == null ? gettext("position %(pos)s %(text)s (prompt)") : gettext("position %(pos)s %(text)s (step %(step)s)"),
      { pos: cols[c].pos, text: JSON.stringify(cols[c].text), step: cols[c].step });
    const grid = matrix({
      label: gettext("Residual-stream norm per position and depth"), corner: gettext("depth ↓ position →"),
      rows: Array.from({ length: depth }, (_, i) => (i === 0 ? gettext("input") : `L${i}`)),
      cols: cols.map((c) => showPiece(c.text)),
      rowTitle: (r) => depthName(r), colTitle: (c) => fill(gettext("%(name)s: click to chart"), { name: name(c) }),
      cell: (r, c) => ({
        cls: c === sel ? "selected" : "",
        // Log scale: the input's norm is a hundredth of the last layer's, and would be blank on a linear one.
        background: heat(colMax[c] ? Math.log1p(Math.max(0, cols[c].values[r])) / Math.log1p(colMax[c]) : 0),
        title: normTitle(name(c), depthName(r), cols[c].values[r]),
      }),
      onCell: (_r, c) => { this.#col = c; this.#colAt = k; this.render(state); },
    });
    const v = cols[sel].values;
    const grew = v[0] ? v[v.length - 1] / v[0] : NaN;
    return [scroller(grid), this.#chart(v, name(sel)), caption(sentences([
      fill(gettext("Measured on this run: the L2 norm of the residual stream at %(positions)s (%(prompt)s prompt, %(generated)s generated), "
        + "from the input through %(layers)s."), { positions: counted(ngettext("%(n)s position", "%(n)s positions", cols.length), cols.length),
        prompt: P, generated: cols.length - P, layers: layerCount(depth - 1) }),
      gettext("Each column is coloured relative to its own largest norm, on a log scale (so the small input norms still show)."),
      fill(gettext("Chart: %(name)s, from %(from)s to %(to)s (×%(growth)s)."), { name: name(sel), from: fmt(v[0], 3), to: fmt(v[v.length - 1], 3), growth: fmt(grew, 1) }),
      gettext("Click a column to chart it; hover for values."),
    ]))];
  }

  #chart(values, label) {
    const W = 320, H = 120, pad = 44; // room for a label like "102.9" and the axis title
    const max = Math.max(...values.filter(Number.isFinite)) || 1;
    const x = (i) => pad + ((W - pad - 8) * i) / Math.max(1, values.length - 1);
    const y = (v) => H - 18 - ((H - 30) * v) / max;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "he-chart", role: "img", "aria-label": fill(gettext("Norm through depth, %(name)s"), { name: label }) });
    chart.append(svg("line", { x1: pad, y1: H - 18, x2: W - 8, y2: H - 18, class: "axis" }),
      svg("line", { x1: pad, y1: 10, x2: pad, y2: H - 18, class: "axis" }),
      svg("text", { x: pad - 4, y: 14, "text-anchor": "end", class: "tick" }, fmt(max, 1)),
      svg("text", { x: pad - 4, y: H - 18, "text-anchor": "end", class: "tick" }, "0"),
      svg("text", { x: 9, y: (H - 8) / 2, "text-anchor": "middle", class: "tick axis-title", transform: `rotate(-90 9 ${(H - 8) / 2})` }, gettext("norm")),
      svg("text", { x: (W + pad) / 2, y: H - 4, "text-anchor": "middle", class: "tick axis-title" }, gettext("depth")),
      svg("text", { x: pad, y: H - 4, class: "tick" }, gettext("input")),
      svg("text", { x: W - 8, y: H - 4, "text-anchor": "end", class: "tick" }, fill(gettext("layer %(n)s"), { n: values.length - 1 })),
      svg("polyline", { points: values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "), class: "line" }));
    values.forEach((v, i) => {
      const title = normTitle(label, depthName(i), v);
      const dot = svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3.5, class: "dot", title });
      dot.append(svg("title", {}, title));
      chart.append(dot);
    });
    return chart;
  }

  #lensTable(state) {
    const n = state.steps.length;
    const chosenStep = this.step(n); // the page's step bar (0: the prompt's last position)
    const step = chosenStep ? state.steps[chosenStep - 1] : null;
    const sent = (step ? step.lens : state.prefill.lens) || [];
    // Large models send the lens for a few layers only; every layer comes on demand (detail what=lens).
    const full = state.details[detailKey({ what: "lens", step: chosenStep })]?.lens;
    const lens = full || sent;
    const chosen = step?.token ?? null;
    const top = (step ? step.logits?.top : state.prefill.logits?.top)?.[0] ?? null;
    const pieces = knownPieces(state);
    const controls = el("div", { class: "he-controls" });
    controls.append(el("span", { class: "he-step-label" }, chosenStep
      ? fill(gettext("Prediction for step %(step)s of %(count)s (the page's step)"), { step: chosenStep, count: n })
      : gettext("Prediction for the prompt's last position (step 0)")));
    const layers = state.model?.layers ?? lens.length;
    if (!full && lens.length < layers) {
      this.#askWholeLens(state, chosenStep);
      const more = el("button", { type: "button", class: "secondary" }, counted(ngettext("Read all %(n)s layer", "Read all %(n)s layers", layers), layers));
      more.addEventListener("click", () => { more.disabled = true; requestFromServer(this, { type: "detail", what: "lens", step: chosenStep }); });
      controls.append(more);
    }
    if (!lens.length) return [controls, el("p", { class: "he-empty" }, gettext("No logit-lens rows were captured for this position."))];
    const asked = this.#askedLayer(lens, layers, pieces);

    const k = Math.max(...lens.map((r) => r.ids.length));
    const table = el("table", { class: "he-lens" });
    const line = readout(gettext("Hover, tap or focus a cell (arrow keys move) for its probability."));
    const hr = el("tr");
    hr.append(el("th", { scope: "col" }, gettext("read after")));
    for (let i = 0; i < k; i++) hr.append(el("th", { scope: "col" }, `#${i + 1}`));
    table.append(el("thead"), el("tbody"));
    table.tHead.append(hr);
    for (const r of lens) {
      const tr = el("tr", r.layer === asked.layer ? { class: "selected", "aria-current": "true" } : {});
      tr.append(el("th", { scope: "row" }, `L${r.layer + 1}`)); // lens row i reads block i's output: "after layer i + 1"
      r.ids.forEach((id, i) => {
        const text = r.texts?.[i] ?? pieces.get(id);
        const p = r.probs[i];
        const hit = chosen && id === chosen.id;
        const td = hover(el("td", { class: hit ? "hit" : "", style: `--p:${Math.max(0, Math.min(1, p)) * 100}%` }),
          fill(hit ? gettext("after layer %(layer)s (L%(layer)s), guess %(rank)s: %(token)s id %(id)s, probability %(p)s — the token this step chose")
            : gettext("after layer %(layer)s (L%(layer)s), guess %(rank)s: %(token)s id %(id)s, probability %(p)s"),
          { layer: r.layer + 1, rank: i + 1, token: text != null ? JSON.stringify(text) : gettext("(text not sent)"), id, p: fmt(p, 4) }),
          line, false);
        td.append(el("span", { class: "piece" }, text != null ? showPiece(text) : `#${id}`), el("span", { class: "prob" }, fmt(p, 2)));
        tr.append(td);
      });
      table.tBodies[0].append(tr);
    }
    const last = lens[lens.length - 1];
    const lastText = last.texts?.[0] ?? pieces.get(last.ids[0]);
    const firstHit = chosen ? lens.find((r) => r.ids[0] === chosen.id) : null;
    roving(table.tBodies[0].querySelectorAll("td"), { columns: k }); // one tab stop: arrows across guesses and layers
    const guess = { token: lastText != null ? JSON.stringify(lastText) : `id ${last.ids[0]}`, p: fmt(last.probs[0], 3),
      top: JSON.stringify(top?.text), top_p: fmt(top?.prob, 3) };
    const said = chosen && { token: JSON.stringify(chosen.text), layer: firstHit ? firstHit.layer + 1 : null };
    return [controls, ...asked.line, scroller(table), line, caption(sentences([
      fill(gettext("Measured on this run (%(where)s): %(layers)s read through the final norm and output head."), {
        where: step ? fill(gettext("step %(step)s, position %(position)s"), { step: chosenStep, position: step.input.position }) : gettext("the prompt's last position"),
        layers: layerCount(lens.length) }),
      fill(top ? gettext("The last one's top guess is %(token)s at %(p)s; the model's own top logit is %(top)s at %(top_p)s.")
        : gettext("The last one's top guess is %(token)s at %(p)s."), guess),
      !said ? "" : fill(said.layer ? gettext("The chosen token %(token)s is first the top guess after layer %(layer)s (L%(layer)s).")
        : gettext("The chosen token %(token)s is never the top lens guess."), said),
      gettext("Hover a cell for the probability."),
    ]))];
  }

  /**
   * On sight, ask once for every layer's lens of the step shown (render runs only near the viewport), when the
   * step is settled: a finished or paused run, or a step scrubbed back to. A streaming run's newest step is not
   * asked for, so decoding pays nothing while it runs. A recording cannot answer: the page drops the request.
   */
  #askWholeLens(state, step) {
    const live = state.status?.run_state || state.status?.state;
    if (!state.session || !(state.done || live === "paused" || step < state.steps.length)) return;
    const shown = step ? state.steps[step - 1] : state.prefill;
    clearTimeout(this.#lensTimer);
    this.#lensTimer = setTimeout(() => {
      if (!shown || this.#asked.has(shown) || this.dataset.step !== String(step) || !this.isConnected) return;
      this.#asked.add(shown);
      requestFromServer(this, { type: "detail", what: "lens", step, auto: true });
    }, LENS_AFTER_MS);
  }

  /** An author's `layer` attribute (from 1, as labelled): its lens row is marked and its guess said in one line. */
  #askedLayer(lens, layers, pieces) {
    const layer = resolveIndex(this.getAttribute("layer"), layers, 1);
    if (layer == null) { delete this.dataset.layer; return { layer: null, line: [] }; }
    this.dataset.layer = String(layer + 1);
    const row = lens.find((r) => r.layer === layer);
    const text = row ? row.texts?.[0] ?? pieces.get(row.ids[0]) : null;
    const said = row ? fill(gettext("Layer %(layer)s (L%(layer)s): top guess %(token)s at %(p)s."),
      { layer: layer + 1, token: text != null ? JSON.stringify(text) : `id ${row.ids[0]}`, p: fmt(row.probs[0], 3) })
      : fill(gettext("Layer %(layer)s (L%(layer)s) was not read at this position."), { layer: layer + 1 });
    return { layer, line: [el("p", { class: "he-lens-chosen" }, said)] };
  }
}

define("he-layers", HeLayers);
