// <he-speculative>: speculative decoding on this server. Each round a draft proposes up to k tokens — a small
// draft model's guesses, or (n-gram prompt lookup, any model) tokens copied from earlier in the sequence;
// the target checks them all in one forward pass, keeps the agreeing prefix, and adds one of its own.
import { SteppedElement, define, el, caption, fmt } from "../lib/base-element.js";
import { readout, hover, chip, textsOf, pct, int } from "../lib/widgets.js";
import { Measure, MeasuredElement, stats, bars, legend, ms } from "../lib/measure.js";
import { gettext, gettext_noop, ngettext, fill, grouped } from "../lib/i18n.js";

const DRAFTS = [["", gettext_noop("the server's default")], ["ngram", gettext_noop("n-gram prompt lookup (no draft model)")], ["model", gettext_noop("the draft model")]];

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens" ("– tokens" if unknown). */
const count = (n, text) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });
const tokens = (n) => count(n, ngettext("%(n)s token", "%(n)s tokens", n));

class HeSpeculative extends MeasuredElement {
  static what = "speculative";
  static get label() { return gettext("Measure speculative decoding on this server"); }
  static attr = "acceptanceRate";
  static get idle() {
    return gettext("Press the button: a draft proposes tokens for your prompt (or the article's) — copied from earlier "
      + "in the text (n-gram prompt lookup) or guessed by a small draft model — and this server's model verifies them, "
      + "greedily; then the model decodes alone for comparison.");
  }

  render(rs) {
    if (!this.measure) {
      const select = el("select", { class: "he-draft", "aria-label": gettext("Draft") });
      for (const [value, label] of DRAFTS) select.append(el("option", { value }, gettext(label)));
      this.measure = new Measure(this, "speculative", { label: HeSpeculative.label, fields: ["draft"],
        extra: () => (select.value ? { draft: select.value } : {}) });
      const picker = el("label", { class: "he-draft-label" }, gettext("draft: "));
      picker.append(select);  // el() takes one text argument: the menu is appended, not passed after it
      this.measure.node.append(picker);
    }
    super.render(rs);
  }

  draw(data, rs) {
    const ngram = data.method === "ngram";
    Object.assign(this.dataset, { acceptanceRate: String(data.acceptance_rate), identical: String(data.identical),
      method: String(data.method ?? "draft_model"), targetPasses: String(data.target_forward_passes), speedup: String(data.speedup) });
    const line = readout(gettext("Hover or tap a token or a number for its details."));
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
      const round = i + 1;
      item.append(el("span", { class: "he-round-label" }, r.proposed.length
        ? fill(gettext("round %(round)s: %(accepted)s/%(proposed)s"), { round, accepted: r.accepted, proposed: r.proposed.length })
        : fill(gettext("round %(round)s: nothing to copy"), { round })));
      const chips = el("span", { class: "he-chips" });
      r.proposed.forEach((id, j) => {
        const values = { round, proposal: j + 1, id };
        if (j < r.accepted) chips.append(token(id, "he-acc", fill(gettext("round %(round)s, proposal %(proposal)s: id %(id)s, accepted (the target's own choice there)"), values)));
        else if (j === r.accepted) chips.append(token(id, "he-rej", fill(gettext("round %(round)s, proposal %(proposal)s: id %(id)s, rejected (the target chose otherwise)"), values)));
        else chips.append(token(id, "he-skip", fill(gettext("round %(round)s, proposal %(proposal)s: id %(id)s, discarded unchecked (after a rejection)"), values)));
      });
      if (r.corrected != null) chips.append(token(r.corrected, "he-corr", fill(gettext("round %(round)s: id %(id)s, the target's token in place of the rejected one"), { round, id: r.corrected })));
      if (r.bonus != null) chips.append(token(r.bonus, "he-bonus", fill(gettext("round %(round)s: id %(id)s, bonus token from the target's pass (all proposals accepted)"), { round, id: r.bonus })));
      item.append(chips);
      list.append(item);
    });
    const scroll = el("div", { class: "he-scroll capped", tabindex: "0", role: "region", "aria-label": gettext("speculative decoding passes (scrollable)") });
    scroll.append(list);

    const n = data.tokens.length;
    const alone = data.target_alone_forward_passes ?? data.target_tokens?.length;
    const passCount = (k) => count(k, ngettext("%(n)s pass", "%(n)s passes", k));
    const values = { passes: String(data.target_forward_passes), tokens: tokens(n), draft: String(data.draft_forward_passes) };
    const passes = bars([
      { label: gettext("speculative"), value: data.target_forward_passes, text: passCount(data.target_forward_passes), cls: "he-t-prefill",
        title: fill(ngram ? gettext("target forward passes with the draft: %(passes)s for %(tokens)s (and no model passes for the lookups)")
          : gettext("target forward passes with the draft: %(passes)s for %(tokens)s (and %(draft)s cheap draft passes)"), values) },
      { label: gettext("target alone"), value: alone ?? 0, text: passCount(alone), cls: "he-t-forward",
        title: fill(gettext("target forward passes decoding alone: %(passes)s for %(tokens)s tokens, one per token"),
          { passes: String(alone), tokens: String(data.target_tokens?.length ?? "–") }) },
    ], line);
    this.view.replaceChildren(
      el("p", { class: `he-big he-identical ${data.identical ? "he-yes" : "he-no"}` },
        data.identical ? gettext("Identical to the target's own greedy output: yes") : gettext("Identical to the target's own greedy output: no")),
      stats([
        [gettext("acceptance rate"), pct(data.acceptance_rate), fill(gettext("acceptance_rate = %(rate)s: accepted proposals / all proposals"), { rate: String(data.acceptance_rate) })],
        [gettext("tokens"), int(n), fill(gettext("%(tokens)s generated, %(rounds)s rounds of up to k = %(k)s proposals"), { tokens: tokens(n), rounds: data.rounds.length, k: String(data.k) })],
        [gettext("target passes"), int(data.target_forward_passes), fill(gettext("%(passes)s target forward passes for %(tokens)s"), values)],
        ngram ? [gettext("draft"), fill(gettext("%(n)s-gram lookup"), { n: int(data.ngram_size) }),
          fill(gettext("proposals copied from what followed the latest earlier match of the last 1–%(n)s tokens; rounds without a match are ordinary decode steps"), { n: String(data.ngram_size) })]
          : [gettext("draft passes"), int(data.draft_forward_passes), fill(gettext("%(draft)s draft forward passes (one per proposal)"), values)],
        [gettext("speed-up"), `${fmt(data.speedup, 2)}×`, fill(gettext("target alone %(alone)s ms / speculative %(spec)s ms = %(speedup)s×"),
          { alone: fmt(data.target_ms, 1), spec: fmt(data.spec_ms, 1), speedup: fmt(data.speedup, 3) })],
      ], line),
      el("p", { class: "he-col-sub" }, fill(gettext("Forward passes of this server's model for %(tokens)s:"), values)), passes,
      el("p", { class: "he-col-sub" }, gettext("Each round, the draft's proposals:")),
      legend([["he-acc", gettext("accepted")], ["he-rej", gettext("first rejected")], ["he-skip", gettext("discarded")], ["he-corr", gettext("target's correction")], ["he-bonus", gettext("bonus")]]),
      scroll, line,
      caption(`${measured(data, ngram, n)} ${gettext("Token ids without text did not appear in your run.")} `
        + (ngram ? gettext("Prompt lookup only pays off when the reply repeats earlier text (quotes, code, lists); otherwise most rounds find nothing to copy.")
          : gettext("A speed-up below 1 means the draft cost more than it saved: with a target this small, its passes are already cheap."))));
  }
}

/** The caption's first sentence: when, with which draft, how many tokens in how long. */
function measured(data, ngram, n) {
  const values = { when: data.measured_at ? fill(gettext("at %(time)s (UTC)"), { time: data.measured_at }) : gettext("just now"),
    k: String(data.k), tokens: tokens(n), spec: ms(data.spec_ms), alone: ms(data.target_ms) };
  return fill(ngram
    ? gettext("Measured %(when)s on this server: greedy speculative decoding with n-gram prompt lookup, k = %(k)s, %(tokens)s in %(spec)s against %(alone)s for the model alone.")
    : gettext("Measured %(when)s on this server: greedy speculative decoding with a draft model, k = %(k)s, %(tokens)s in %(spec)s against %(alone)s for the model alone."), values);
}

define("he-speculative", HeSpeculative);
