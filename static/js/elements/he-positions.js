// <he-positions>: how the model knows where each token sits.
// Rotary: prefill.positions.rotary {theta, head_dim, freq_index[], angles (tokens, len(freq_index))} as clock hands.
// Learned: prefill.positions.learned (tokens, dims) as colour strips.
import { SteppedElement, define, el, caption, showPiece, heat, fmt } from "../lib/base-element.js";
import { unpack, at, row } from "../lib/packed.js";
import { readout, hover } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { plural } from "../lib/plural.js";

const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
};
const TAU = 2 * Math.PI;

function clock(angle, title) {
  const s = svg("svg", { viewBox: "-12 -12 24 24", class: "he-clock", role: "img", "aria-label": title });
  const t = svg("title", {});
  t.textContent = title;
  s.append(t, svg("circle", { r: 10.5, class: "face" }));
  const x = 9 * Math.cos(angle), y = -9 * Math.sin(angle);
  s.append(svg("line", { x1: 0, y1: 0, x2: 9, y2: 0, class: "zero" }), svg("line", { x1: 0, y1: 0, x2: fmt(x, 2), y2: fmt(y, 2), class: "hand" }));
  return s;
}

class HePositions extends SteppedElement {
  render(state) {
    const pos = state.prefill?.positions;
    if (!pos) { this.root.replaceChildren(el("p", { class: "he-empty" }, "Press play: each position's encoding appears here.")); return; }
    const tokens = state.prefill.tokens || [];
    this.dataset.scheme = pos.scheme;
    this.dataset.positions = String(tokens.length);
    if (pos.scheme === "rotary" && pos.rotary) this.#rotary(pos.rotary, tokens);
    else if (pos.learned) this.#learned(unpack(pos.learned), tokens);
    else this.root.replaceChildren(el("p", { class: "he-empty" }, `Position scheme "${pos.scheme}": nothing to draw.`));
  }

  #rotary(rot, tokens) {
    const angles = unpack(rot.angles);
    const [count, nf] = angles.shape;
    const pairs = rot.head_dim / 2;
    // The per-position step of each pair, read off the angles themselves (angle = position × frequency).
    const step = rot.freq_index.map((_, j) => (count > 1 ? at(angles, count - 1, j) / (count - 1) : NaN));

    const head = el("p", { class: "he-head" });
    head.append("Rotary positions: each pair of a ", el("strong", {}, `${rot.head_dim}-dim`),
      ` query/key head vector (${plural(pairs, "pair")}) is turned by position × frequency; θ (theta) = `,
      el("strong", {}, fmt(rot.theta, 0)), `. Shown: ${nf} of the ${plural(pairs, "pair")}.`);

    const grid = el("div", { class: "he-clocks", style: `--n:${nf}`, role: "table", "aria-label": "Rotation angle per position and frequency pair" });
    const hr = el("div", { class: "he-clock-row he-row-head", role: "row" });
    hr.append(el("span", { class: "label", role: "columnheader" }, "pos · token │ pair →"));
    rot.freq_index.forEach((f, j) => {
      hr.append(el("span", { class: "col", role: "columnheader", title: `pair ${f}: ${Number.isFinite(step[j]) ? `${fmt(step[j], 4)} rad per position` : "one position only"}`, "aria-label": `pair ${f}` }, String(f)));
    });
    grid.append(hr);
    const line = readout("Hover, tap or focus a dial (arrow keys move) for its angle.");
    for (let p = 0; p < count; p++) {
      const tok = tokens[p] || { text: "" };
      const r = el("div", { class: "he-clock-row", role: "row" });
      r.append(el("span", { class: "label", role: "rowheader", title: `position ${p}, id ${tok.id}` }, `${p} ${showPiece(tok.text)}`));
      rot.freq_index.forEach((f, j) => {
        const a = at(angles, p, j);
        const wrapped = ((a % TAU) + TAU) % TAU;
        const title = `position ${p}, pair ${f}: ${fmt(a, 3)} rad total = ${fmt((wrapped * 180) / Math.PI, 1)}° on the dial`;
        const cell = hover(el("span", { class: "col", role: "cell" }), title, line, false);
        cell.append(clock(a, title));
        r.append(cell);
      });
      grid.append(r);
    }
    // One tab stop for the dials: Left/Right along a position's pairs, Up/Down between positions.
    roving(grid.querySelectorAll(".he-clock-row:not(.he-row-head) .col"), { columns: nf });
    const scroll = el("div", { class: "he-scroll tall", tabindex: "0", role: "region", "aria-label": "rotation angles (scrollable)" });
    scroll.append(grid);
    const fast = step[0], slow = step[nf - 1];
    this.root.replaceChildren(head, scroll, line, caption(
      `Measured on this run: angles for ${plural(count, "position")} × ${nf} frequency pairs. ` +
      (count > 1 ? `The fastest pair shown turns ${fmt(fast, 3)} rad per position, the slowest ${fmt(slow, 5)} rad, so nearby positions differ in the fast pairs and distant ones in the slow pairs. ` : "") +
      "The grey line is angle 0 (position 0); hover a dial for its angle.",
    ));
  }

  #learned(learned, tokens) {
    const [count, dims] = learned.shape;
    let maxAbs = 0;
    for (const v of learned.data) if (Number.isFinite(v)) maxAbs = Math.max(maxAbs, Math.abs(v));
    const head = el("p", { class: "he-head" });
    head.append("Learned positions: a trained vector per position is added to each token's row. Shown: the first ",
      el("strong", {}, dims), " numbers of each.");
    const table = el("div", { class: "he-rows", role: "table", "aria-label": "Learned position vectors" });
    const line = readout("Hover, tap or focus a cell (arrow keys move) for its value.");
    for (let p = 0; p < count; p++) {
      const tok = tokens[p] || { text: "" };
      const line = el("div", { class: "he-row", role: "row" });
      line.append(el("span", { class: "label", role: "rowheader" }, `${p} ${showPiece(tok.text)}`));
      const strip = el("span", { class: "he-strip", role: "cell", style: `--n:${dims}` });
      row(learned, p).forEach((v, d) => strip.append(hover(el("span", {
        class: "he-cell", style: `background:${heat(maxAbs ? v / maxAbs : 0, true)}`,
      }), `position ${p}, dim ${d}: ${fmt(v, 4)}`, line, false)));
      line.append(strip);
      table.append(line);
    }
    roving(table.querySelectorAll(".he-cell"), { columns: dims });
    this.root.replaceChildren(head, table, line, caption(
      `Measured on this run: the position vectors for positions 0–${count - 1}, first ${dims} dims; colours scaled to ±${fmt(maxAbs, 3)}. Hover a cell for its value.`,
    ));
  }
}

define("he-positions", HePositions);
