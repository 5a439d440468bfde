// <he-batch>: batching on this server. The visitor's prompt decoded alone and in batches with other
// prompts: throughput against batch size, and how far row 0's logits and greedy tokens moved.
import { SteppedElement, define, el, caption, fmt } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { MeasuredElement, bars } from "../lib/measure.js";
import { plural } from "../lib/plural.js";

/** A logit difference: exactly 0, or in scientific notation (they are tiny). */
function diff(x) {
  if (x == null || !Number.isFinite(x)) return "–";
  return x === 0 ? "0 (identical)" : x.toExponential(2);
}

class HeBatch extends MeasuredElement {
  static what = "batch";
  static label = "Measure batching on this server";
  static attr = "batchSizes";
  static idle = "Press the button: the server decodes your prompt (or the article's, before you run one) "
        + "alone and in batches of 2, 4 and 8 with other prompts, greedily, and compares.";

  /** The live line: how many visitors' steps shared the forward pass of the step the page shows. */
  render(rs) {
    super.render(rs);
    const n = this.step(rs?.steps?.length ?? 0);
    const step = n ? rs.steps[n - 1] : null;
    if (step?.batch_size) this.dataset.batchSize = String(step.batch_size); else delete this.dataset.batchSize;
    this.liveLine ??= el("p", { class: "he-live" });
    const joined = rs?.prefill?.batch_size;  // visitors whose prompts shared the prefill's forward pass
    const others = joined === 2 ? "1 other visitor's prompt" : `${joined - 1} other visitors' prompts`;
    const cached = rs?.prefill?.cached_tokens ?? 0;
    const reused = cached ? ` (its first ${plural(cached, "token")} from the prefix cache, computed by an earlier prefill)` : "";
    const prefill = joined ? ` Your prompt was prefilled ${joined === 1 ? "alone" : `in one pass with ${others}`}${reused}.` : "";
    this.liveLine.textContent = step?.batch_size
      ? `Your step ${step.step} ran in a batch of ${step.batch_size}${step.batch_size === 1 ? " (alone)" : ""}.${prefill}` : prefill.trim();
    if (this.liveLine.parentNode !== this.root) this.root.prepend(this.liveLine);
  }

  draw(data, rs) {
    const runs = data.runs;
    this.dataset.batchSizes = runs.map((r) => r.batch_size).join(",");
    const flips = runs.reduce((a, r) => a + r.flipped_tokens, 0);
    this.dataset.flippedTokens = String(flips);
    const line = readout("Hover or tap a bar or a row for its exact values.");

    const throughput = bars(runs.map((r) => ({
      label: `batch of ${r.batch_size}`, value: r.tokens_per_s, cls: "he-t-forward",
      text: `${fmt(r.tokens_per_s, 1)} tok/s${data.throughput_ratio[r.batch_size] != null ? ` (${fmt(data.throughput_ratio[r.batch_size], 2)}×)` : ""}`,
      title: `batch of ${r.batch_size}: ${plural(r.batch_size, "row")} decoded together in ${r.seconds} s = ${r.tokens_per_s} tokens/s over all rows, `
        + `${data.throughput_ratio[r.batch_size] ?? "–"}× batch size 1`,
    })), line);

    const table = el("table", { class: "he-table he-drift" });
    const head = el("tr");
    for (const h of ["batch size", "max |logit difference|", "flipped tokens", "first flip", "padding"]) head.append(el("th", { scope: "col" }, h));
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    for (const r of runs) {
      const tr = el("tr", { class: r.flipped_tokens ? "he-flip" : null });
      tr.append(el("td", {}, r.batch_size), el("td", { class: "he-num" }, diff(r.max_abs_logit_diff)), el("td", { class: "he-num" }, int(r.flipped_tokens)),
        el("td", {}, r.first_flip == null ? "none" : `token ${r.first_flip + 1}: ${data.reference_tokens[r.first_flip]} → ${r.tokens[r.first_flip]}`),
        el("td", { class: "he-num" }, int(r.padding_tokens)));
      hover(tr, `batch of ${r.batch_size}: row 0's logits differ from batch size 1 by at most ${r.max_abs_logit_diff} `
        + `(over the steps before the first flip); ${r.flipped_tokens} of ${plural(data.reference_tokens.length, "greedy token")} differ`
        + `${r.first_flip == null ? "" : `, first at token ${r.first_flip + 1} (id ${data.reference_tokens[r.first_flip]} became ${r.tokens[r.first_flip]})`}; `
        + `${plural(r.padding_tokens, "pad position")}`, line);
      body.append(tr);
    }
    table.append(thead, body);
    const scroll = el("div", { class: "he-scroll capped", tabindex: "0", role: "region", "aria-label": "the batch (scrollable)" });
    scroll.append(table);

    const worst = Math.max(...runs.map((r) => r.max_abs_logit_diff));
    const verdict = flips
      ? `Here the batch changed your greedy reply: ${plural(flips, "token")} flipped across the batch sizes, at temperature 0.`
      : worst > 0
        ? `Here the logits moved (by at most ${worst.toExponential(2)}) but no greedy token flipped: the top candidates were never close enough.`
        : "Here the logits came out bit-for-bit identical: this machine's kernels did not change their arithmetic with the batch shape.";
    this.view.replaceChildren(
      el("p", { class: "he-col-sub" }, "Throughput: tokens per second over every row of the batch, and the ratio to batch size 1:"), throughput,
      el("p", { class: "he-col-sub" }, `Your row (row 0) against decoding it alone, ${plural(data.reference_tokens.length, "greedy token")}:`), scroll,
      el("p", { class: "he-callout" }, verdict), line,
      caption(`Measured ${data.measured_at ? `at ${data.measured_at} (UTC)` : "just now"} on this server's model (${data.model}): ${rs.serving?.batch?.prompt === "article" ? "the article's" : "your"} ${int(data.prompt_tokens)}-token prompt decoded greedily for up to ${plural(data.max_new_tokens, "token")}, `
        + "alone and as row 0 of batches padded on the left with other prompts. The differences are exactly what this machine produced, "
        + "and may well be 0; on other hardware and kernels they need not be."));
  }
}

define("he-batch", HeBatch);
