// <he-kv>: the KV cache as it fills: real bytes per layer, bytes per token, share of the context
// window, and what grouped-query attention saves.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { mount, readout, hover, pct, int } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { plural } from "../lib/plural.js";

const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2, float64: 8, float8_e4m3fn: 1, float8_e5m2: 1, int8: 1, uint8: 1 };

class HeKv extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    const kv = step ? step.kv : rs.prefill?.kv;
    if (!kv) { delete this.dataset.kvBytes; body.replaceChildren(caption("Waiting for the run: the cache fills during the prefill.")); return; }
    this.dataset.kvBytes = String(kv.bytes);
    this.dataset.step = String(n);
    const line = readout("Hover or tap a bar for its exact bytes.");
    const model = rs.session?.model;

    const stats = el("dl", { class: "he-stats" });
    const stat = (k, v, title) => { const d = el("div"); d.append(el("dt", {}, k), el("dd", {}, v)); hover(d, title, line, false); stats.append(d); };
    stat("cache", bytes(kv.bytes), `kv.bytes = ${int(kv.bytes)} bytes: every cached key and value tensor`);
    stat("positions", int(kv.seq_len), `kv.seq_len = ${plural(kv.seq_len, "token")} held`);
    stat("per token", bytes(kv.bytes_per_token), `kv.bytes_per_token = ${int(kv.bytes_per_token)} bytes`);
    stat("of the window", pct(kv.context_used ?? kv.seq_len / kv.context_window), `${kv.seq_len} of ${plural(kv.context_window, "position")}`);
    roving(stats.children);

    // Each layer's track is this run's most: prompt + max_new_tokens − 1 positions, so the bars fill as it runs.
    const P = rs.prefill?.tokens?.length ?? kv.seq_len;
    const maxNew = rs.session?.params?.max_new_tokens;
    const most = Math.min(kv.context_window, Math.max(kv.seq_len, maxNew ? P + maxNew - 1 : kv.seq_len));
    const layers = el("div", { class: "he-barlist" });
    const size = DTYPE_BYTES[kv.dtype];
    kv.layers.forEach((l, i) => {
      const count = l.shape.reduce((a, b) => a * b, 1);
      const formula = size && 2 * count * size === l.bytes ? ` = 2 (K and V) × ${l.shape.join("·")} × ${size} B (${kv.dtype})` : "";
      const row = el("div", { class: "he-brow" });
      const track = el("div", { class: "he-btrack" });
      const perPos = l.shape[2] ? l.bytes / l.shape[2] : 0;
      track.append(el("div", { class: "he-bbar he-kvbar", style: `width:${perPos ? Math.min(1, l.bytes / (perPos * most)) * 100 : 0}%` }));
      row.append(el("span", { class: "he-blabel" }, `layer ${i + 1}`), track, el("span", { class: "he-bval" }, bytes(l.bytes)));
      hover(row, `layer ${i + 1}: ${int(l.bytes)} bytes${formula}; shape [batch, kv_heads, seq, head_dim] = [${l.shape.join(", ")}]; `
        + `${int(perPos * most)} bytes at ${plural(most, "position")}`, line);
      layers.append(row);
    });
    roving(layers.children); // one tab stop, arrow keys from layer to layer

    const ctx = el("div", { class: "he-btrack he-ctxtrack" });
    const used = kv.seq_len / kv.context_window;
    ctx.append(el("div", { class: "he-bbar he-kvbar", style: `width:${Math.min(1, used) * 100}%` }));
    hover(ctx, `${kv.seq_len} of ${plural(kv.context_window, "position")} cached (${pct(used)})`, line);
    const full = kv.bytes_per_token * kv.context_window;

    const parts = [stats, el("p", { class: "he-col-sub" }, `bytes held by each layer (keys and values); a full track is ${plural(most, "position")}, `
      + (maxNew ? `the most this run can reach (${int(P)} prompt + ${int(maxNew)} max_new_tokens − 1):` : "the positions cached now:")), layers,
      el("p", { class: "he-col-sub" }, `positions cached, out of the ${int(kv.context_window)}-position context window:`), ctx,
      el("p", {}, `At ${bytes(kv.bytes_per_token)} per token, a full window of ${plural(kv.context_window, "position")} would take ${bytes(full)} (${int(full)} bytes).`)];

    if (model && model.query_heads && model.kv_heads) {
      const ratio = model.query_heads / model.kv_heads;
      const mha = Math.round(kv.bytes * ratio);
      const gqa = el("div", { class: "he-gqa" });
      if (ratio > 1) {
        gqa.append(el("p", {}, `Grouped-query attention: ${plural(model.query_heads, "query head")} share ${plural(model.kv_heads, "KV head")} `
          + `(${fmtRatio(ratio)} query heads per KV head). With one KV head per query head the cache would be `
          + `${model.query_heads}/${model.kv_heads} = ${fmtRatio(ratio)}× larger = ${int(mha)} bytes (${bytes(mha)}) instead of ${int(kv.bytes)}.`));
        for (const [label, b, cls] of [["GQA (this model)", kv.bytes, "he-kvbar"], ["one KV head per query head", mha, "he-mhabar"]]) {
          const row = el("div", { class: "he-brow" });
          const track = el("div", { class: "he-btrack" });
          track.append(el("div", { class: `he-bbar ${cls}`, style: `width:${(b / mha) * 100}%` }));
          row.append(el("span", { class: "he-blabel he-wide" }, label), track, el("span", { class: "he-bval" }, bytes(b)));
          hover(row, `${label}: ${int(b)} bytes`, line);
          gqa.append(row);
        }
        roving(gqa.querySelectorAll(".he-brow"));
      } else {
        gqa.append(el("p", {}, `This model has one KV head per query head (${model.query_heads} and ${model.kv_heads}): no grouped-query saving.`));
      }
      parts.push(gqa);
    }
    const where = step ? `after step ${n} (${step.forward} forward pass)` : "after the prefill";
    parts.push(line, caption(`Measured ${where}: the cache holds ${plural(kv.seq_len, "position")} in ${plural(kv.layers.length, "layer")}, `
      + `${int(kv.bytes)} bytes${kv.dtype ? ` of ${kv.dtype}` : ""} (the sum of every cached key and value tensor's size), ${int(kv.bytes_per_token)} bytes per token`
      + `${model ? ` of ${model.name}` : ""}. It grows by one position per step.`));
    body.replaceChildren(...parts);
  }
}

function fmtRatio(r) { return Number.isInteger(r) ? String(r) : r.toFixed(2); }

define("he-kv", HeKv);
