// <he-logits>: the LM head's top candidates for one step, as raw logits with their probabilities.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { mount, readout, hover, chip, pct, int, forkRow } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { plural } from "../lib/plural.js";


class HeLogits extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    const logits = step ? step.logits : rs.prefill?.logits;
    if (!logits) { delete this.dataset.topId; delete this.dataset.vocabSize; body.replaceChildren(caption("Waiting for the run: no logits yet.")); return; }
    const top = logits.top;
    this.dataset.topId = top.length ? String(top[0].id) : "";
    this.dataset.vocabSize = String(logits.vocab_size);
    this.dataset.step = String(n);

    const line = readout();
    const lo = Math.min(0, ...top.map((t) => t.logit));
    const hi = Math.max(0, ...top.map((t) => t.logit));
    const span = hi - lo || 1;
    const zero = (-lo / span) * 100;
    const chart = el("div", { class: "he-logits", role: "list" });
    const chosen = step?.token?.id;
    top.forEach((t, i) => {
      const row = el("div", { class: `he-lrow${t.id === chosen ? " he-chosen" : ""}`, role: "listitem" });
      const track = el("div", { class: "he-ltrack" });
      const left = t.logit >= 0 ? zero : zero - (-t.logit / span) * 100;
      const bar = el("div", { class: `he-lbar${t.logit < 0 ? " he-neg" : ""}`,
        style: `left:${left}%;width:${(Math.abs(t.logit) / span) * 100}%` });
      const pbar = el("div", { class: "he-pbar", style: `width:${t.prob * 100}%` });
      track.append(bar, pbar);
      if (lo < 0) track.append(el("div", { class: "he-zero", style: `left:${zero}%` }));
      row.append(chip(t.text, t.id), track,
        el("span", { class: "he-lval" }, `${fmt(t.logit, 2)} · ${pct(t.prob)}`));
      hover(row, `#${i + 1} ${showPiece(t.text)} (id ${t.id}): raw logit ${t.logit}, softmax of raw logits ${pct(t.prob)}`
        + (t.id === chosen ? " (the token this step chose)" : ""), line);
      chart.append(row);
    });
    roving(chart.children); // one tab stop; arrow keys go from candidate to candidate

    const shownMass = top.reduce((a, t) => a + t.prob, 0);
    const where = step ? `Step ${n} (${step.forward} forward pass, position ${step.input.position})` : "The prefill";
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "he-key he-key-logit" }), " raw logit  ",
      el("span", { class: "he-key he-key-prob" }), " probability (softmax of the raw logits, before temperature and filters)");
    body.replaceChildren(
      el("p", { class: "he-big" }, `one score for each of ${plural(logits.vocab_size, "token")}`),
      legend, chart, line, ...(step ? [forkRow(this, step, top)] : []),
      caption(`${where}: the LM head produced ${int(logits.vocab_size)} logits, one for each token of the vocabulary. `
        + `The ${top.length} highest are shown, sorted by raw logit; together they hold ${pct(shownMass)} of the probability. `
        + (top.some((t) => t.id === chosen) ? `Outlined: the token this step chose (id ${chosen}).`
          : chosen != null ? `This step chose id ${chosen}, outside these ${top.length}.` : "")),
    );
  }
}

define("he-logits", HeLogits);
