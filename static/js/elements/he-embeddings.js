// <he-embeddings>: each prompt token's row of the embedding table (its first dims) as a colour strip,
// with the norm of the full row. Reads prefill.embeddings {shape, slice, norms, scale} and prefill.tokens.
import { SteppedElement, define, el, caption, showPiece, heat, ink, fmt } from "../lib/base-element.js";
import { unpack, row } from "../lib/packed.js";
import { readout, hover } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { fill, gettext, grouped, ngettext, sentences } from "../lib/i18n.js";

class HeEmbeddings extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre?.embeddings) { this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: the looked-up rows appear here."))); return; }
    this.dataset.rows = String(pre.embeddings.norms.shape[0]);
    this.dataset.tableShape = pre.embeddings.shape.join("x");
    const emb = pre.embeddings;
    const tokens = pre.tokens || [];
    const slice = unpack(emb.slice);
    const norms = unpack(emb.norms);
    const [vocab, hidden] = emb.shape;
    const [rows, dims] = slice.shape;
    let maxAbs = 0;
    for (const v of slice.data) if (Number.isFinite(v)) maxAbs = Math.max(maxAbs, Math.abs(v));
    let maxNorm = 0;
    for (const v of norms.data) if (Number.isFinite(v)) maxNorm = Math.max(maxNorm, v);

    const head = el("p", { class: "he-head" });
    const [before, after] = fill(ngettext("The table: %(shape)s (vocabulary × hidden size, %(count)s numbers). Each token reads one row; shown: the first %(dims)s of its %(n)s number.",
      "The table: %(shape)s (vocabulary × hidden size, %(count)s numbers). Each token reads one row; shown: the first %(dims)s of its %(n)s numbers.", hidden),
    { count: grouped(vocab * hidden), dims, n: grouped(hidden), shape: "%(shape)s" }).split("%(shape)s");
    head.append(before, el("strong", {}, `${grouped(vocab)} × ${grouped(hidden)}`), after ?? "");

    const table = el("div", { class: "he-rows", role: "table", "aria-label": gettext("Embedding rows") });
    const header = el("div", { class: "he-row he-row-head", role: "row" });
    header.append(el("span", { class: "label", role: "columnheader" }, gettext("token")),
      el("span", { class: "strip-label", role: "columnheader" }, fill(gettext("dims 0–%(last)s"), { last: dims - 1 })),
      el("span", { class: "norm", role: "columnheader" }, gettext("norm (full row)")));
    table.append(header);
    const line = readout(gettext("Hover, tap or focus a cell (arrow keys move) for its value."));
    for (let t = 0; t < rows; t++) {
      const tok = tokens[t] || { id: "?", text: "" };
      const tr = el("div", { class: "he-row", role: "row" });
      tr.append(el("span", { class: "label", role: "rowheader", title: fill(gettext("position %(position)s, id %(id)s"), { position: t, id: tok.id }) }, showPiece(tok.text)));
      const strip = el("span", { class: "he-strip", role: "cell", style: `--n:${dims}` });
      const values = row(slice, t);
      values.forEach((v, d) => {
        const cell = el("span", { class: "he-cell", style: `background:${heat(maxAbs ? v / maxAbs : 0, true)}` });
        strip.append(hover(cell, fill(gettext("%(text)s (id %(id)s), row %(id)s dim %(dim)s: %(value)s"), { text: JSON.stringify(tok.text), id: tok.id, dim: d, value: fmt(v, 4) }), line, false));
      });
      tr.append(strip);
      const n = norms.data[t];
      const norm = hover(el("span", { class: "norm", role: "cell" }), fill(gettext("L2 norm of row %(id)s (all %(dims)s dims): %(value)s"), { id: tok.id, dims: hidden, value: fmt(n, 4) }), line, false);
      norm.append(el("span", { class: "bar", style: `width:${maxNorm ? (100 * n) / maxNorm : 0}%` }), el("span", { class: "value" }, fmt(n, 2)));
      tr.append(norm);
      table.append(tr);
    }
    // One tab stop for the grid: Left/Right along a row (its dims, then its norm), Up/Down between tokens.
    roving(table.querySelectorAll(".he-row:not(.he-row-head) :is(.he-cell, .norm)"), { columns: dims + 1 });

    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "swatch", style: `background:${heat(-1, true)}; color:${ink(heat(-1, true))}` }, `−${fmt(maxAbs, 2)}`),
      el("span", { class: "swatch", style: `background:${heat(0, true)}; color:${ink(heat(0, true))}` }, "0"),
      el("span", { class: "swatch", style: `background:${heat(1, true)}; color:${ink(heat(1, true))}` }, `+${fmt(maxAbs, 2)}`));

    const ids = new Set(tokens.map((t) => t.id));
    const scaled = emb.scale != null && emb.scale !== 1
      ? fill(gettext("Before layer 0 every row is multiplied by %(scale)s."), { scale: fmt(emb.scale, 3) }) : "";
    this.root.replaceChildren(head, legend, table, line, caption(sentences([
      fill(ngettext("Measured on this run: %(n)s row read from a %(vocab)s × %(hidden)s table (%(ids)s distinct ids).",
        "Measured on this run: %(n)s rows read from a %(vocab)s × %(hidden)s table (%(ids)s distinct ids).", rows), { n: grouped(rows), vocab, hidden, ids: ids.size }),
      fill(gettext("Norms range %(low)s–%(high)s; colours scaled to the largest |value| shown, %(max)s."),
        { low: fmt(Math.min(...norms.data), 3), high: fmt(maxNorm, 3), max: fmt(maxAbs, 3) }),
      scaled, gettext("Hover or focus a cell for its value."),
    ].filter(Boolean))));
  }
}

define("he-embeddings", HeEmbeddings);
