// <he-quant>: weight-only quantization on this server. A copy of the model with its Linear weights
// stored in 8 bits: memory before and after, decode speed, and how far its outputs moved.
import { SteppedElement, define, el, caption, bytes, fmt } from "../lib/base-element.js";
import { readout, pct, int } from "../lib/widgets.js";
import { MeasuredElement, stats, bars } from "../lib/measure.js";
import { plural } from "../lib/plural.js";

class HeQuant extends MeasuredElement {
  static what = "quantize";
  static label = "Measure quantization on this server";
  static attr = "weightBytesAfter";
  static idle = "Press the button: the server stores a copy of its model's weights in 8-bit integers "
        + "and compares it with the original on your prompt (or the article's).";

  draw(data, rs) {
    this.dataset.weightBytesAfter = String(data.weight_bytes_after);
    const line = readout("Hover or tap a bar or a number for its exact value.");
    const saved = 1 - data.weight_bytes_after / data.weight_bytes_before;
    const memory = bars([
      { label: "original", value: data.weight_bytes_before, text: bytes(data.weight_bytes_before), cls: "he-t-forward",
        title: `weight_bytes_before = ${int(data.weight_bytes_before)} bytes: every parameter and buffer` },
      { label: `int${data.bits} copy`, value: data.weight_bytes_after, text: bytes(data.weight_bytes_after), cls: "he-t-sampling",
        title: `weight_bytes_after = ${int(data.weight_bytes_after)} bytes (${pct(saved)} smaller): small integers, their scales, and what stayed in float` },
    ], line);
    const speed = bars([
      { label: "original", value: data.decode_tokens_per_s_before, text: `${fmt(data.decode_tokens_per_s_before, 1)} tok/s`, cls: "he-t-forward",
        title: `decode_tokens_per_s_before = ${data.decode_tokens_per_s_before}` },
      { label: `int${data.bits} copy`, value: data.decode_tokens_per_s_after, text: `${fmt(data.decode_tokens_per_s_after, 1)} tok/s`, cls: "he-t-sampling",
        title: `decode_tokens_per_s_after = ${data.decode_tokens_per_s_after}; ratio ${data.decode_speed_ratio}` },
    ], line);
    this.view.replaceChildren(
      el("p", { class: "he-col-sub" }, "Memory the weights take:"), memory,
      el("p", { class: "he-col-sub" }, "Decode speed (the best of two runs each):"), speed,
      stats([
        ["weights", `${pct(saved)} smaller`, `${int(data.weight_bytes_before)} → ${int(data.weight_bytes_after)} bytes`],
        ["decode speed", `${fmt(data.decode_speed_ratio, 2)}×`, `decode_speed_ratio = ${data.decode_speed_ratio}: int${data.bits} tokens/s over original tokens/s`],
        ["max |logit difference|", fmt(data.max_abs_logit_diff, 4), `max_abs_logit_diff = ${data.max_abs_logit_diff}: both models read the same sequence, every position compared`],
        ["top-1 agreement", pct(data.top1_agreement), `top1_agreement = ${data.top1_agreement}: positions where both models rank the same token first`],
        ["greedy reply", data.greedy_tokens_identical ? "identical" : "different", `greedy_tokens_identical = ${data.greedy_tokens_identical}: each model decoding freely`],
      ], line),
      el("p", {}, `${plural(data.quantized_layers, "linear layer")} were stored as int${data.bits} with one scale per output channel. `
        + `LM head: ${data.lm_head}.${/tied/.test(data.lm_head) ? " It shares its matrix with the embedding table, which stays in float, so the head does too." : ""}`),
      line,
      caption(`Measured ${data.measured_at ? `at ${data.measured_at} (UTC)` : "just now"} on this server's model: weight-only int${data.bits} quantization of a copy (the original is untouched), compared on your prompt `
        + "(or the article's, before you run one). Its weights are turned back into floats at every call, with no fast integer kernel, so on this machine it saves memory but need not decode faster."));
  }
}

define("he-quant", HeQuant);
