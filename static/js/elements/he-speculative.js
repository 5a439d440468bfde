// <he-speculative>: speculative decoding on this server. Each round a draft proposes up to k tokens — a small
// draft model's guesses, or (n-gram prompt lookup, any model) tokens copied from earlier in the sequence;
// the target checks them all in one forward pass, keeps the agreeing prefix, and adds one of its own.
import { SteppedElement, define, el, caption, fmt } from "../lib/base-element.js";
import { readout, hover, chip, textsOf, pct, int } from "../lib/widgets.js";
import { Measure, MeasuredElement, stats, bars, legend, ms } from "../lib/measure.js";
import { plural } from "../lib/plural.js";

const DRAFTS = [["", "the server's default"], ["ngram", "n-gram prompt lookup (no draft model)"], ["model", "the draft model"]];

class HeSpeculative extends MeasuredElement {
  static what = "speculative";
  static label = "Measure speculative decoding on this server";
  static attr = "acceptanceRate";
  static idle = "Press the button: a draft proposes tokens for your prompt (or the article's) — copied from earlier "
        + "in the text (n-gram prompt lookup) or guessed by a small draft model — and this server's model verifies them, "
        + "greedily; then the model decodes alone for comparison.";

  render(rs) {
    if (!this.measure) {
      const select = el("select", { class: "he-draft", "aria-label": "Draft" });
      for (const [value, label] of DRAFTS) select.append(el("option", { value }, label));
      this.measure = new Measure(this, "speculative", { label: HeSpeculative.label, fields: ["draft"],
        extra: () => (select.value ? { draft: select.value } : {}) });
      const picker = el("label", { class: "he-draft-label" }, "draft: ");
      picker.append(select);  // el() takes one text argument: the menu is appended, not passed after it
      this.measure.node.append(picker);
    }
    super.render(rs);
  }

  draw(data, rs) {
    const ngram = data.method === "ngram";
    Object.assign(this.dataset, { acceptanceRate: String(data.acceptance_rate), identical: String(data.identical),
      method: String(data.method ?? "draft_model"), targetPasses: String(data.target_forward_passes), speedup: String(data.speedup) });
    const line = readout("Hover or tap a token or a number for its details.");
    // Token texts: the run's own, and the report's pieces for drafts the run never showed.
    const texts = textsOf(rs.prefill?.tokens, ...rs.steps.flatMap((s) => [[s.token], s.logits?.top, s.probs]));
    for (const [id, text] of Object.entries(data.pieces || {})) texts.set(Number(id), text);  // the report's own
    const token = (id, cls, title) => {
      const node = texts.has(id) ? chip(texts.get(id), id, cls) : el("span", { class: `he-chip ${cls}`, "data-id": id });
      if (!texts.has(id)) node.append(el("span", { class: "he-id" }, `#${id}`));
      return hover(node, title, line);
    };

    const list = el("ol", { class: "he-rounds" });
    data.rounds.forEach((r, i) => {
      const item = el("li", { class: "he-round" });
      item.append(el("span", { class: "he-round-label" }, r.proposed.length ? `round ${i + 1}: ${r.accepted}/${r.proposed.length}` : `round ${i + 1}: nothing to copy`));
      const chips = el("span", { class: "he-chips" });
      r.proposed.forEach((id, j) => {
        if (j < r.accepted) chips.append(token(id, "he-acc", `round ${i + 1}, proposal ${j + 1}: id ${id}, accepted (the target's own choice there)`));
        else if (j === r.accepted) chips.append(token(id, "he-rej", `round ${i + 1}, proposal ${j + 1}: id ${id}, rejected (the target chose otherwise)`));
        else chips.append(token(id, "he-skip", `round ${i + 1}, proposal ${j + 1}: id ${id}, discarded unchecked (after a rejection)`));
      });
      if (r.corrected != null) chips.append(token(r.corrected, "he-corr", `round ${i + 1}: id ${r.corrected}, the target's token in place of the rejected one`));
      if (r.bonus != null) chips.append(token(r.bonus, "he-bonus", `round ${i + 1}: id ${r.bonus}, bonus token from the target's pass (all proposals accepted)`));
      item.append(chips);
      list.append(item);
    });
    const scroll = el("div", { class: "he-scroll capped", tabindex: "0", role: "region", "aria-label": "speculative decoding passes (scrollable)" });
    scroll.append(list);

    const n = data.tokens.length;
    const alone = data.target_alone_forward_passes ?? data.target_tokens?.length;
    const passes = bars([
      { label: "speculative", value: data.target_forward_passes, text: `${plural(data.target_forward_passes, "pass")}`, cls: "he-t-prefill",
        title: `target forward passes with the draft: ${data.target_forward_passes} for ${plural(n, "token")} (and ${ngram ? "no model passes for the lookups" : `${data.draft_forward_passes} cheap draft passes`})` },
      { label: "target alone", value: alone ?? 0, text: `${plural(alone, "pass")}`, cls: "he-t-forward",
        title: `target forward passes decoding alone: ${alone} for ${data.target_tokens?.length ?? "–"} tokens, one per token` },
    ], line);
    this.view.replaceChildren(
      el("p", { class: `he-big he-identical ${data.identical ? "he-yes" : "he-no"}` },
        `Identical to the target's own greedy output: ${data.identical ? "yes" : "no"}`),
      stats([
        ["acceptance rate", pct(data.acceptance_rate), `acceptance_rate = ${data.acceptance_rate}: accepted proposals / all proposals`],
        ["tokens", int(n), `${plural(n, "token")} generated, ${data.rounds.length} rounds of up to k = ${data.k} proposals`],
        ["target passes", int(data.target_forward_passes), `${data.target_forward_passes} target forward passes for ${plural(n, "token")}`],
        ngram ? ["draft", `${int(data.ngram_size)}-gram lookup`, `proposals copied from what followed the latest earlier match of the last 1–${data.ngram_size} tokens; rounds without a match are ordinary decode steps`]
          : ["draft passes", int(data.draft_forward_passes), `${data.draft_forward_passes} draft forward passes (one per proposal)`],
        ["speed-up", `${fmt(data.speedup, 2)}×`, `target alone ${fmt(data.target_ms, 1)} ms / speculative ${fmt(data.spec_ms, 1)} ms = ${fmt(data.speedup, 3)}×`],
      ], line),
      el("p", { class: "he-col-sub" }, `Forward passes of this server's model for ${plural(n, "token")}:`), passes,
      el("p", { class: "he-col-sub" }, "Each round, the draft's proposals:"),
      legend([["he-acc", "accepted"], ["he-rej", "first rejected"], ["he-skip", "discarded"], ["he-corr", "target's correction"], ["he-bonus", "bonus"]]),
      scroll, line,
      caption(`Measured ${data.measured_at ? `at ${data.measured_at} (UTC)` : "just now"} on this server: greedy speculative decoding with ${ngram ? "n-gram prompt lookup" : "a draft model"}, `
        + `k = ${data.k}, ${plural(n, "token")} in ${ms(data.spec_ms)} against ${ms(data.target_ms)} for the model alone. `
        + "Token ids without text did not appear in your run. "
        + (ngram ? "Prompt lookup only pays off when the reply repeats earlier text (quotes, code, lists); otherwise most rounds find nothing to copy."
          : "A speed-up below 1 means the draft cost more than it saved: with a target this small, its passes are already cheap.")));
  }
}

define("he-speculative", HeSpeculative);
