// <he-batch>: batching on this server. The visitor's prompt decoded alone and in batches with other
// prompts: throughput against batch size, and how far row 0's logits and greedy tokens moved.
import { SteppedElement, define, el, caption, fmt } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { MeasuredElement, bars } from "../lib/measure.js";
import { fill, gettext, gettext_noop, grouped, ngettext } from "../lib/i18n.js";

/** A logit difference: exactly 0, or in scientific notation (they are tiny). */
function diff(x) {
  if (x == null || !Number.isFinite(x)) return "–";
  return x === 0 ? gettext("0 (identical)") : x.toExponential(2);
}

class HeBatch extends MeasuredElement {
  static what = "batch";
  static label = gettext_noop("Measure batching on this server"); // translated where drawn (MeasuredElement)
  static attr = "batchSizes";
  static idle = gettext_noop("Press the button: the server decodes your prompt (or the article's, before you run one) "
    + "alone and in batches of 2, 4 and 8 with other prompts, greedily, and compares.");

  /** The live line: how many visitors' steps shared the forward pass of the step the page shows. */
  render(rs) {
    super.render(rs);
    const n = this.step(rs?.steps?.length ?? 0);
    const step = n ? rs.steps[n - 1] : null;
    if (step?.batch_size) this.dataset.batchSize = String(step.batch_size); else delete this.dataset.batchSize;
    this.liveLine ??= el("p", { class: "he-live" });
    const joined = rs?.prefill?.batch_size;  // visitors whose prompts shared the prefill's forward pass
    const cached = rs?.prefill?.cached_tokens ?? 0;
    const ran = step?.batch_size
      ? fill(step.batch_size === 1 ? gettext("Your step %(step)s ran in a batch of %(size)s (alone).") : gettext("Your step %(step)s ran in a batch of %(size)s."),
        { step: step.step, size: step.batch_size }) : "";
    this.liveLine.textContent = [ran, joined ? prefilled(joined, cached) : ""].filter(Boolean).join(" ");
    if (this.liveLine.parentNode !== this.root) this.root.prepend(this.liveLine);
  }

  draw(data, rs) {
    const runs = data.runs;
    this.dataset.batchSizes = runs.map((r) => r.batch_size).join(",");
    const flips = runs.reduce((a, r) => a + r.flipped_tokens, 0);
    this.dataset.flippedTokens = String(flips);
    const line = readout(gettext("Hover or tap a bar or a row for its exact values."));

    const throughput = bars(runs.map((r) => ({
      label: fill(gettext("batch of %(size)s"), { size: r.batch_size }), value: r.tokens_per_s, cls: "he-t-forward",
      text: data.throughput_ratio[r.batch_size] != null
        ? fill(gettext("%(rate)s tok/s (%(ratio)s×)"), { rate: fmt(r.tokens_per_s, 1), ratio: fmt(data.throughput_ratio[r.batch_size], 2) })
        : fill(gettext("%(rate)s tok/s"), { rate: fmt(r.tokens_per_s, 1) }),
      title: fill(ngettext("batch of %(size)s: %(n)s row decoded together in %(seconds)s s = %(rate)s tokens/s over all rows, %(ratio)s× batch size 1",
        "batch of %(size)s: %(n)s rows decoded together in %(seconds)s s = %(rate)s tokens/s over all rows, %(ratio)s× batch size 1", r.batch_size),
      { size: r.batch_size, n: grouped(r.batch_size), seconds: r.seconds, rate: r.tokens_per_s, ratio: data.throughput_ratio[r.batch_size] ?? "–" }),
    })), line);

    const table = el("table", { class: "he-table he-drift" });
    const head = el("tr");
    for (const h of [gettext("batch size"), gettext("max |logit difference|"), gettext("flipped tokens"), gettext("first flip"), gettext("padding")]) {
      head.append(el("th", { scope: "col" }, h));
    }
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    for (const r of runs) {
      const tr = el("tr", { class: r.flipped_tokens ? "he-flip" : null });
      tr.append(el("td", {}, r.batch_size), el("td", { class: "he-num" }, diff(r.max_abs_logit_diff)), el("td", { class: "he-num" }, int(r.flipped_tokens)),
        el("td", {}, r.first_flip == null ? gettext("none")
          : fill(gettext("token %(n)s: %(before)s → %(after)s"), { n: r.first_flip + 1, before: data.reference_tokens[r.first_flip], after: r.tokens[r.first_flip] })),
        el("td", { class: "he-num" }, int(r.padding_tokens)));
      hover(tr, drift(r, data), line);
      body.append(tr);
    }
    table.append(thead, body);
    const scroll = el("div", { class: "he-scroll capped", tabindex: "0", role: "region", "aria-label": gettext("the batch (scrollable)") });
    scroll.append(table);

    const worst = Math.max(...runs.map((r) => r.max_abs_logit_diff));
    const verdict = flips
      ? fill(ngettext("Here the batch changed your greedy reply: %(n)s token flipped across the batch sizes, at temperature 0.",
        "Here the batch changed your greedy reply: %(n)s tokens flipped across the batch sizes, at temperature 0.", flips), { n: grouped(flips) })
      : worst > 0
        ? fill(gettext("Here the logits moved (by at most %(max)s) but no greedy token flipped: the top candidates were never close enough."), { max: worst.toExponential(2) })
        : gettext("Here the logits came out bit-for-bit identical: this machine's kernels did not change their arithmetic with the batch shape.");
    const greedy = data.reference_tokens.length;
    this.view.replaceChildren(
      el("p", { class: "he-col-sub" }, gettext("Throughput: tokens per second over every row of the batch, and the ratio to batch size 1:")), throughput,
      el("p", { class: "he-col-sub" }, fill(ngettext("Your row (row 0) against decoding it alone, %(n)s greedy token:",
        "Your row (row 0) against decoding it alone, %(n)s greedy tokens:", greedy), { n: grouped(greedy) })), scroll,
      el("p", { class: "he-callout" }, verdict), line,
      caption(`${measured(data, rs.serving?.batch?.prompt === "article")} `
        + gettext("The differences are exactly what this machine produced, and may well be 0; on other hardware and kernels they need not be.")));
  }
}

/** The live line's prefill sentence: alone or with `joined - 1` other prompts, `cached` tokens from the prefix cache. */
function prefilled(joined, cached) {
  const others = fill(ngettext("%(n)s other visitor's prompt", "%(n)s other visitors' prompts", joined - 1), { n: grouped(joined - 1) });
  if (!cached) return joined === 1 ? gettext("Your prompt was prefilled alone.") : fill(gettext("Your prompt was prefilled in one pass with %(others)s."), { others });
  const text = joined === 1
    ? ngettext("Your prompt was prefilled alone (its first %(n)s token from the prefix cache, computed by an earlier prefill).",
      "Your prompt was prefilled alone (its first %(n)s tokens from the prefix cache, computed by an earlier prefill).", cached)
    : ngettext("Your prompt was prefilled in one pass with %(others)s (its first %(n)s token from the prefix cache, computed by an earlier prefill).",
      "Your prompt was prefilled in one pass with %(others)s (its first %(n)s tokens from the prefix cache, computed by an earlier prefill).", cached);
  return fill(text, { others, n: grouped(cached) });
}

/** A row's hover line: how far row 0's logits and greedy tokens moved in a batch of this size. */
function drift(r, data) {
  const values = {
    size: r.batch_size, max: r.max_abs_logit_diff, flipped: r.flipped_tokens,
    total: fill(ngettext("%(n)s greedy token", "%(n)s greedy tokens", data.reference_tokens.length), { n: grouped(data.reference_tokens.length) }),
    padding: fill(ngettext("%(n)s pad position", "%(n)s pad positions", r.padding_tokens), { n: grouped(r.padding_tokens) }),
  };
  if (r.first_flip == null) {
    return fill(gettext("batch of %(size)s: row 0's logits differ from batch size 1 by at most %(max)s (over the steps before the first flip); "
      + "%(flipped)s of %(total)s differ; %(padding)s"), values);
  }
  return fill(gettext("batch of %(size)s: row 0's logits differ from batch size 1 by at most %(max)s (over the steps before the first flip); "
    + "%(flipped)s of %(total)s differ, first at token %(first)s (id %(before)s became %(after)s); %(padding)s"),
  { ...values, first: r.first_flip + 1, before: data.reference_tokens[r.first_flip], after: r.tokens[r.first_flip] });
}

/** The caption's first sentence: when, on which model, whose prompt, for how many tokens. */
function measured(data, article) {
  const n = data.max_new_tokens;
  const text = data.measured_at
    ? article
      ? ngettext("Measured at %(time)s (UTC) on this server's model (%(model)s): the article's %(tokens)s-token prompt decoded greedily for up to %(n)s token, alone and as row 0 of batches padded on the left with other prompts.",
        "Measured at %(time)s (UTC) on this server's model (%(model)s): the article's %(tokens)s-token prompt decoded greedily for up to %(n)s tokens, alone and as row 0 of batches padded on the left with other prompts.", n)
      : ngettext("Measured at %(time)s (UTC) on this server's model (%(model)s): your %(tokens)s-token prompt decoded greedily for up to %(n)s token, alone and as row 0 of batches padded on the left with other prompts.",
        "Measured at %(time)s (UTC) on this server's model (%(model)s): your %(tokens)s-token prompt decoded greedily for up to %(n)s tokens, alone and as row 0 of batches padded on the left with other prompts.", n)
    : article
      ? ngettext("Measured just now on this server's model (%(model)s): the article's %(tokens)s-token prompt decoded greedily for up to %(n)s token, alone and as row 0 of batches padded on the left with other prompts.",
        "Measured just now on this server's model (%(model)s): the article's %(tokens)s-token prompt decoded greedily for up to %(n)s tokens, alone and as row 0 of batches padded on the left with other prompts.", n)
      : ngettext("Measured just now on this server's model (%(model)s): your %(tokens)s-token prompt decoded greedily for up to %(n)s token, alone and as row 0 of batches padded on the left with other prompts.",
        "Measured just now on this server's model (%(model)s): your %(tokens)s-token prompt decoded greedily for up to %(n)s tokens, alone and as row 0 of batches padded on the left with other prompts.", n);
  return fill(text, { time: data.measured_at, model: data.model, tokens: int(data.prompt_tokens), n: grouped(n) });
}

define("he-batch", HeBatch);
