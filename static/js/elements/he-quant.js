// <he-quant>: weight-only quantization on this server. A copy of the model with its Linear weights
// stored in 8 bits: memory before and after, decode speed, and how far its outputs moved.
import { SteppedElement, define, el, caption, bytes, fmt } from "../lib/base-element.js";
import { readout, pct, int } from "../lib/widgets.js";
import { MeasuredElement, stats, bars } from "../lib/measure.js";
import { fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

class HeQuant extends MeasuredElement {
  static what = "quantize";
  static label = gettext_noop("Measure quantization on this server");
  static attr = "weightBytesAfter";
  static idle = gettext_noop("Press the button: the server stores a copy of its model's weights in 8-bit integers "
        + "and compares it with the original on your prompt (or the article's).");

  draw(data, rs) {
    this.dataset.weightBytesAfter = String(data.weight_bytes_after);
    const line = readout(gettext("Hover or tap a bar or a number for its exact value."));
    const saved = 1 - data.weight_bytes_after / data.weight_bytes_before;
    const bits = String(data.bits);
    const original = gettext("original"), copy = fill(gettext("int%(bits)s copy"), { bits });
    const memory = bars([
      { label: original, value: data.weight_bytes_before, text: bytes(data.weight_bytes_before), cls: "he-t-forward",
        title: fill(gettext("weight_bytes_before = %(bytes)s bytes: every parameter and buffer"), { bytes: int(data.weight_bytes_before) }) },
      { label: copy, value: data.weight_bytes_after, text: bytes(data.weight_bytes_after), cls: "he-t-sampling",
        title: fill(gettext("weight_bytes_after = %(bytes)s bytes (%(saved)s smaller): small integers, their scales, and what stayed in float"),
          { bytes: int(data.weight_bytes_after), saved: pct(saved) }) },
    ], line);
    const speed = bars([
      { label: original, value: data.decode_tokens_per_s_before, text: `${fmt(data.decode_tokens_per_s_before, 1)} tok/s`, cls: "he-t-forward",
        title: `decode_tokens_per_s_before = ${data.decode_tokens_per_s_before}` },
      { label: copy, value: data.decode_tokens_per_s_after, text: `${fmt(data.decode_tokens_per_s_after, 1)} tok/s`, cls: "he-t-sampling",
        title: fill(gettext("decode_tokens_per_s_after = %(speed)s; ratio %(ratio)s"),
          { speed: String(data.decode_tokens_per_s_after), ratio: String(data.decode_speed_ratio) }) },
    ], line);
    const raw = (key) => String(data[key]); // a field's value as the server sent it
    this.view.replaceChildren(
      el("p", { class: "he-col-sub" }, gettext("Memory the weights take:")), memory,
      el("p", { class: "he-col-sub" }, gettext("Decode speed (the best of two runs each):")), speed,
      stats([
        [gettext("weights"), fill(gettext("%(saved)s smaller"), { saved: pct(saved) }),
          fill(gettext("%(before)s → %(after)s bytes"), { before: int(data.weight_bytes_before), after: int(data.weight_bytes_after) })],
        [gettext("decode speed"), `${fmt(data.decode_speed_ratio, 2)}×`,
          fill(gettext("decode_speed_ratio = %(value)s: int%(bits)s tokens/s over original tokens/s"), { value: raw("decode_speed_ratio"), bits })],
        [gettext("max |logit difference|"), fmt(data.max_abs_logit_diff, 4),
          fill(gettext("max_abs_logit_diff = %(value)s: both models read the same sequence, every position compared"), { value: raw("max_abs_logit_diff") })],
        [gettext("top-1 agreement"), pct(data.top1_agreement),
          fill(gettext("top1_agreement = %(value)s: positions where both models rank the same token first"), { value: raw("top1_agreement") })],
        [gettext("greedy reply"), data.greedy_tokens_identical ? gettext("identical") : gettext("different"),
          fill(gettext("greedy_tokens_identical = %(value)s: each model decoding freely"), { value: raw("greedy_tokens_identical") })],
      ], line),
      el("p", {}, sentences([
        fill(ngettext("%(n)s linear layer were stored as int%(bits)s with one scale per output channel.",
          "%(n)s linear layers were stored as int%(bits)s with one scale per output channel.", data.quantized_layers),
        { n: Number.isFinite(Number(data.quantized_layers)) && data.quantized_layers != null ? grouped(data.quantized_layers) : "–", bits }),
        // lm_head is "int8", or the server's "float (tied to embeddings)": said here in the page's words
        fill(gettext("LM head: %(head)s."), { head: /tied/.test(data.lm_head) ? gettext("float (tied to embeddings)") : String(data.lm_head) }),
        ...(/tied/.test(data.lm_head) ? [gettext("It shares its matrix with the embedding table, which stays in float, so the head does too.")] : []),
      ])),
      line,
      caption(`${fill(data.measured_at
        ? gettext("Measured at %(time)s (UTC) on this server's model: weight-only int%(bits)s quantization of a copy (the original is untouched), "
          + "compared on your prompt (or the article's, before you run one).")
        : gettext("Measured just now on this server's model: weight-only int%(bits)s quantization of a copy (the original is untouched), "
          + "compared on your prompt (or the article's, before you run one)."), { time: data.measured_at, bits })} `
        + gettext("Its weights are turned back into floats at every call, with no fast integer kernel, so on this machine it saves memory but need not decode faster.")));
  }
}

define("he-quant", HeQuant);
