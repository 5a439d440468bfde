// <he-kv>: the KV cache as it fills: real bytes per layer, bytes per token, share of the context
// window, and what grouped-query attention saves.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { mount, readout, hover, pct, int } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { decimal, fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2, float64: 8, float8_e4m3fn: 1, float8_e5m2: 1, int8: 1, uint8: 1 };
/** A step's forward pass (step.forward), named in the reader's language where it is shown. */
const PASS = { prefill: gettext_noop("prefill"), decode: gettext_noop("decode") };

class HeKv extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    const kv = step ? step.kv : rs.prefill?.kv;
    if (!kv) { delete this.dataset.kvBytes; body.replaceChildren(caption(gettext("Waiting for the run: the cache fills during the prefill."))); return; }
    this.dataset.kvBytes = String(kv.bytes);
    this.dataset.step = String(n);
    const line = readout(gettext("Hover or tap a bar for its exact bytes."));
    const model = rs.session?.model;

    const stats = el("dl", { class: "he-stats" });
    const stat = (k, v, title) => { const d = el("div"); d.append(el("dt", {}, k), el("dd", {}, v)); hover(d, title, line, false); stats.append(d); };
    stat(gettext("cache"), bytes(kv.bytes), fill(gettext("kv.bytes = %(bytes)s bytes: every cached key and value tensor"), { bytes: int(kv.bytes) }));
    stat(gettext("positions"), int(kv.seq_len), fill(ngettext("kv.seq_len = %(n)s token held", "kv.seq_len = %(n)s tokens held", kv.seq_len), { n: grouped(kv.seq_len) }));
    stat(gettext("per token"), bytes(kv.bytes_per_token), fill(gettext("kv.bytes_per_token = %(bytes)s bytes"), { bytes: int(kv.bytes_per_token) }));
    stat(gettext("of the window"), pct(kv.context_used ?? kv.seq_len / kv.context_window),
      fill(ngettext("%(used)s of %(n)s position", "%(used)s of %(n)s positions", kv.context_window), { used: kv.seq_len, n: grouped(kv.context_window) }));
    roving(stats.children);

    // Each layer's track is this run's most: prompt + max_new_tokens − 1 positions, so the bars fill as it runs.
    const P = rs.prefill?.tokens?.length ?? kv.seq_len;
    const maxNew = rs.session?.params?.max_new_tokens;
    const most = Math.min(kv.context_window, Math.max(kv.seq_len, maxNew ? P + maxNew - 1 : kv.seq_len));
    const layers = el("div", { class: "he-barlist" });
    const size = DTYPE_BYTES[kv.dtype];
    kv.layers.forEach((l, i) => {
      const count = l.shape.reduce((a, b) => a * b, 1);
      const formula = size && 2 * count * size === l.bytes;
      const row = el("div", { class: "he-brow" });
      const track = el("div", { class: "he-btrack" });
      const perPos = l.shape[2] ? l.bytes / l.shape[2] : 0;
      track.append(el("div", { class: "he-bbar he-kvbar", style: `width:${perPos ? Math.min(1, l.bytes / (perPos * most)) * 100 : 0}%` }));
      row.append(el("span", { class: "he-blabel" }, fill(gettext("layer %(n)s"), { n: i + 1 })), track, el("span", { class: "he-bval" }, bytes(l.bytes)));
      const text = formula
        ? ngettext("layer %(layer)s: %(bytes)s bytes = 2 (K and V) × %(formula)s × %(size)s B (%(dtype)s); shape [batch, kv_heads, seq, head_dim] = [%(shape)s]; %(full)s bytes at %(n)s position",
          "layer %(layer)s: %(bytes)s bytes = 2 (K and V) × %(formula)s × %(size)s B (%(dtype)s); shape [batch, kv_heads, seq, head_dim] = [%(shape)s]; %(full)s bytes at %(n)s positions", most)
        : ngettext("layer %(layer)s: %(bytes)s bytes; shape [batch, kv_heads, seq, head_dim] = [%(shape)s]; %(full)s bytes at %(n)s position",
          "layer %(layer)s: %(bytes)s bytes; shape [batch, kv_heads, seq, head_dim] = [%(shape)s]; %(full)s bytes at %(n)s positions", most);
      hover(row, fill(text, { layer: i + 1, bytes: int(l.bytes), formula: l.shape.join("·"), size, dtype: kv.dtype, shape: l.shape.join(", "),
        full: int(perPos * most), n: grouped(most) }), line);
      layers.append(row);
    });
    roving(layers.children); // one tab stop, arrow keys from layer to layer

    const ctx = el("div", { class: "he-btrack he-ctxtrack" });
    const used = kv.seq_len / kv.context_window;
    ctx.append(el("div", { class: "he-bbar he-kvbar", style: `width:${Math.min(1, used) * 100}%` }));
    hover(ctx, fill(ngettext("%(used)s of %(n)s position cached (%(share)s)", "%(used)s of %(n)s positions cached (%(share)s)", kv.context_window),
      { used: kv.seq_len, n: grouped(kv.context_window), share: pct(used) }), line);
    const full = kv.bytes_per_token * kv.context_window;

    const trackNote = maxNew
      ? ngettext("bytes held by each layer (keys and values); a full track is %(n)s position, the most this run can reach (%(prompt)s prompt + %(max)s max_new_tokens − 1):",
        "bytes held by each layer (keys and values); a full track is %(n)s positions, the most this run can reach (%(prompt)s prompt + %(max)s max_new_tokens − 1):", most)
      : ngettext("bytes held by each layer (keys and values); a full track is %(n)s position, the positions cached now:",
        "bytes held by each layer (keys and values); a full track is %(n)s positions, the positions cached now:", most);
    const parts = [stats, el("p", { class: "he-col-sub" }, fill(trackNote, { n: grouped(most), prompt: int(P), max: int(maxNew) })), layers,
      el("p", { class: "he-col-sub" }, fill(gettext("positions cached, out of the %(window)s-position context window:"), { window: int(kv.context_window) })), ctx,
      el("p", {}, fill(ngettext("At %(per)s per token, a full window of %(n)s position would take %(size)s (%(bytes)s bytes).",
        "At %(per)s per token, a full window of %(n)s positions would take %(size)s (%(bytes)s bytes).", kv.context_window),
      { per: bytes(kv.bytes_per_token), n: grouped(kv.context_window), size: bytes(full), bytes: int(full) }))];

    if (model && model.query_heads && model.kv_heads) {
      const ratio = model.query_heads / model.kv_heads;
      const mha = Math.round(kv.bytes * ratio);
      const gqa = el("div", { class: "he-gqa" });
      if (ratio > 1) {
        gqa.append(el("p", {}, sentences([
          fill(gettext("Grouped-query attention: %(query)s share %(kv)s (%(ratio)s query heads per KV head)."), {
            query: fill(ngettext("%(n)s query head", "%(n)s query heads", model.query_heads), { n: grouped(model.query_heads) }),
            kv: fill(ngettext("%(n)s KV head", "%(n)s KV heads", model.kv_heads), { n: grouped(model.kv_heads) }), ratio: fmtRatio(ratio) }),
          fill(gettext("With one KV head per query head the cache would be %(query)s/%(kv)s = %(ratio)s× larger = %(bytes)s bytes (%(size)s) instead of %(now)s."),
            { query: model.query_heads, kv: model.kv_heads, ratio: fmtRatio(ratio), bytes: int(mha), size: bytes(mha), now: int(kv.bytes) }),
        ])));
        for (const [label, b, cls] of [[gettext("GQA (this model)"), kv.bytes, "he-kvbar"], [gettext("one KV head per query head"), mha, "he-mhabar"]]) {
          const row = el("div", { class: "he-brow" });
          const track = el("div", { class: "he-btrack" });
          track.append(el("div", { class: `he-bbar ${cls}`, style: `width:${(b / mha) * 100}%` }));
          row.append(el("span", { class: "he-blabel he-wide" }, label), track, el("span", { class: "he-bval" }, bytes(b)));
          hover(row, fill(gettext("%(label)s: %(bytes)s bytes"), { label, bytes: int(b) }), line);
          gqa.append(row);
        }
        roving(gqa.querySelectorAll(".he-brow"));
      } else {
        gqa.append(el("p", {}, fill(gettext("This model has one KV head per query head (%(query)s and %(kv)s): no grouped-query saving."), { query: model.query_heads, kv: model.kv_heads })));
      }
      parts.push(gqa);
    }
    parts.push(line, caption(measured(step, n, kv, model)));
    body.replaceChildren(...parts);
  }
}

function fmtRatio(r) { return Number.isInteger(r) ? String(r) : decimal(r, 2); }

/** The caption: when the cache was measured, what it holds, and how it grows. */
function measured(step, n, kv, model) {
  const forward = PASS[step?.forward] ? gettext(PASS[step.forward]) : step?.forward;
  const values = {
    when: step ? fill(gettext("after step %(step)s (%(forward)s forward pass)"), { step: n, forward }) : gettext("after the prefill"),
    positions: fill(ngettext("%(n)s position", "%(n)s positions", kv.seq_len), { n: grouped(kv.seq_len) }),
    layers: fill(ngettext("%(n)s layer", "%(n)s layers", kv.layers.length), { n: grouped(kv.layers.length) }),
    bytes: kv.dtype ? fill(gettext("%(n)s bytes of %(dtype)s"), { n: int(kv.bytes), dtype: kv.dtype }) : fill(gettext("%(n)s bytes"), { n: int(kv.bytes) }),
    per: model ? fill(gettext("%(n)s bytes per token of %(model)s"), { n: int(kv.bytes_per_token), model: model.name })
      : fill(gettext("%(n)s bytes per token"), { n: int(kv.bytes_per_token) }),
  };
  return `${fill(gettext("Measured %(when)s: the cache holds %(positions)s in %(layers)s, %(bytes)s (the sum of every cached key and value tensor's size), %(per)s."), values)} `
    + gettext("It grows by one position per step.");
}

define("he-kv", HeKv);
