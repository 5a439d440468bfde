// <he-positions>: how the model knows where each token sits.
// Rotary: prefill.positions.rotary {theta, head_dim, freq_index[], angles (tokens, len(freq_index))} as clock hands.
// Learned: prefill.positions.learned (tokens, dims) as colour strips.
import { SteppedElement, define, el, caption, showPiece, heat, fmt } from "../lib/base-element.js";
import { unpack, at, row } from "../lib/packed.js";
import { readout, hover } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { fillParts } from "../lib/grid.js";
import { fill, gettext, grouped, ngettext, sentences } from "../lib/i18n.js";

const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
};
const TAU = 2 * Math.PI;
/** A counted phrase (ngettext's choice for `n`) with `n` filled in: "1 pair", "32 pairs". */
const counted = (text, n) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });

function clock(angle, title) {
  const s = svg("svg", { viewBox: "-12 -12 24 24", class: "he-clock", role: "img", "aria-label": title });
  const t = svg("title", {});
  t.textContent = title;
  s.append(t, svg("circle", { r: 10.5, class: "face" }));
  const x = 9 * Math.cos(angle), y = -9 * Math.sin(angle);
  s.append(svg("line", { x1: 0, y1: 0, x2: 9, y2: 0, class: "zero" }), svg("line", { x1: 0, y1: 0, x2: x.toFixed(2), y2: y.toFixed(2), class: "hand" }));
  return s;
}

class HePositions extends SteppedElement {
  render(state) {
    const pos = state.prefill?.positions;
    if (!pos) { this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: each position's encoding appears here."))); return; }
    const tokens = state.prefill.tokens || [];
    this.dataset.scheme = pos.scheme;
    this.dataset.positions = String(tokens.length);
    if (pos.scheme === "rotary" && pos.rotary) this.#rotary(pos.rotary, tokens);
    else if (pos.learned) this.#learned(unpack(pos.learned), tokens);
    else this.root.replaceChildren(el("p", { class: "he-empty" }, fill(gettext("Position scheme \"%(scheme)s\": nothing to draw."), { scheme: pos.scheme })));
  }

  #rotary(rot, tokens) {
    const angles = unpack(rot.angles);
    const [count, nf] = angles.shape;
    const pairs = rot.head_dim / 2;
    // The per-position step of each pair, read off the angles themselves (angle = position × frequency).
    const step = rot.freq_index.map((_, j) => (count > 1 ? at(angles, count - 1, j) / (count - 1) : NaN));

    const head = el("p", { class: "he-head" });
    const pairCount = counted(ngettext("%(n)s pair", "%(n)s pairs", pairs), pairs);
    head.append(...fillParts(gettext("Rotary positions: each pair of a %(dim)s query/key head vector (%(pairs)s) is turned by "
      + "position × frequency; θ (theta) = %(theta)s. Shown: %(shown)s of the %(pairs)s."), {
      dim: el("strong", {}, fill(gettext("%(n)s-dim"), { n: rot.head_dim })), pairs: pairCount,
      theta: el("strong", {}, fmt(rot.theta, 0)), shown: nf }));

    const grid = el("div", { class: "he-clocks", style: `--n:${nf}`, role: "table", "aria-label": gettext("Rotation angle per position and frequency pair") });
    const hr = el("div", { class: "he-clock-row he-row-head", role: "row" });
    hr.append(el("span", { class: "label", role: "columnheader" }, gettext("pos · token │ pair →")));
    rot.freq_index.forEach((f, j) => {
      const title = Number.isFinite(step[j]) ? fill(gettext("pair %(pair)s: %(step)s rad per position"), { pair: f, step: fmt(step[j], 4) })
        : fill(gettext("pair %(pair)s: one position only"), { pair: f });
      hr.append(el("span", { class: "col", role: "columnheader", title, "aria-label": fill(gettext("pair %(pair)s"), { pair: f }) }, String(f)));
    });
    grid.append(hr);
    const line = readout(gettext("Hover, tap or focus a dial (arrow keys move) for its angle."));
    for (let p = 0; p < count; p++) {
      const tok = tokens[p] || { text: "" };
      const r = el("div", { class: "he-clock-row", role: "row" });
      r.append(el("span", { class: "label", role: "rowheader", title: fill(gettext("position %(position)s, id %(id)s"), { position: p, id: String(tok.id) }) }, `${p} ${showPiece(tok.text)}`));
      rot.freq_index.forEach((f, j) => {
        const a = at(angles, p, j);
        const wrapped = ((a % TAU) + TAU) % TAU;
        const title = fill(gettext("position %(position)s, pair %(pair)s: %(angle)s rad total = %(degrees)s° on the dial"),
          { position: p, pair: f, angle: fmt(a, 3), degrees: fmt((wrapped * 180) / Math.PI, 1) });
        const cell = hover(el("span", { class: "col", role: "cell" }), title, line, false);
        cell.append(clock(a, title));
        r.append(cell);
      });
      grid.append(r);
    }
    // One tab stop for the dials: Left/Right along a position's pairs, Up/Down between positions.
    roving(grid.querySelectorAll(".he-clock-row:not(.he-row-head) .col"), { columns: nf });
    const scroll = el("div", { class: "he-scroll tall", tabindex: "0", role: "region", "aria-label": gettext("rotation angles (scrollable)") });
    scroll.append(grid);
    const fast = step[0], slow = step[nf - 1];
    this.root.replaceChildren(head, scroll, line, caption(sentences([
      fill(gettext("Measured on this run: angles for %(positions)s × %(pairs)s frequency pairs."),
        { positions: counted(ngettext("%(n)s position", "%(n)s positions", count), count), pairs: nf }),
      ...(count > 1 ? [fill(gettext("The fastest pair shown turns %(fast)s rad per position, the slowest %(slow)s rad, "
        + "so nearby positions differ in the fast pairs and distant ones in the slow pairs."), { fast: fmt(fast, 3), slow: fmt(slow, 5) })] : []),
      gettext("The grey line is angle 0 (position 0); hover a dial for its angle."),
    ])));
  }

  #learned(learned, tokens) {
    const [count, dims] = learned.shape;
    let maxAbs = 0;
    for (const v of learned.data) if (Number.isFinite(v)) maxAbs = Math.max(maxAbs, Math.abs(v));
    const head = el("p", { class: "he-head" });
    head.append(...fillParts(gettext("Learned positions: a trained vector per position is added to each token's row. "
      + "Shown: the first %(dims)s numbers of each."), { dims: el("strong", {}, dims) }));
    const table = el("div", { class: "he-rows", role: "table", "aria-label": gettext("Learned position vectors") });
    const line = readout(gettext("Hover, tap or focus a cell (arrow keys move) for its value."));
    for (let p = 0; p < count; p++) {
      const tok = tokens[p] || { text: "" };
      const line = el("div", { class: "he-row", role: "row" });
      line.append(el("span", { class: "label", role: "rowheader" }, `${p} ${showPiece(tok.text)}`));
      const strip = el("span", { class: "he-strip", role: "cell", style: `--n:${dims}` });
      row(learned, p).forEach((v, d) => strip.append(hover(el("span", {
        class: "he-cell", style: `background:${heat(maxAbs ? v / maxAbs : 0, true)}`,
      }), fill(gettext("position %(position)s, dim %(dim)s: %(value)s"), { position: p, dim: d, value: fmt(v, 4) }), line, false)));
      line.append(strip);
      table.append(line);
    }
    roving(table.querySelectorAll(".he-cell"), { columns: dims });
    this.root.replaceChildren(head, table, line, caption(sentences([
      fill(gettext("Measured on this run: the position vectors for positions 0–%(last)s, first %(dims)s dims; colours scaled to ±%(max)s."),
        { last: count - 1, dims, max: fmt(maxAbs, 3) }),
      gettext("Hover a cell for its value."),
    ])));
  }
}

define("he-positions", HePositions);
