// <he-logits>: the LM head's top candidates for one step, as raw logits with their probabilities.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { mount, readout, hover, chip, pct, int, forkRow } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

/** A step's forward pass (step.forward), named in the reader's language where it is shown. */
const PASS = { prefill: gettext_noop("prefill"), decode: gettext_noop("decode") };

class HeLogits extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    const logits = step ? step.logits : rs.prefill?.logits;
    if (!logits) { delete this.dataset.topId; delete this.dataset.vocabSize; body.replaceChildren(caption(gettext("Waiting for the run: no logits yet."))); return; }
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
      hover(row, fill(t.id === chosen
        ? gettext("#%(rank)s %(token)s (id %(id)s): raw logit %(logit)s, softmax of raw logits %(p)s (the token this step chose)")
        : gettext("#%(rank)s %(token)s (id %(id)s): raw logit %(logit)s, softmax of raw logits %(p)s"),
      { rank: i + 1, token: showPiece(t.text), id: t.id, logit: String(t.logit), p: pct(t.prob) }), line);
      chart.append(row);
    });
    roving(chart.children); // one tab stop; arrow keys go from candidate to candidate

    const shownMass = top.reduce((a, t) => a + t.prob, 0);
    const where = step ? fill(gettext("Step %(step)s (%(forward)s forward pass, position %(position)s)"),
      { step: n, forward: PASS[step.forward] ? gettext(PASS[step.forward]) : step.forward, position: step.input.position }) : gettext("The prefill");
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "he-key he-key-logit" }), ` ${gettext("raw logit")}  `,
      el("span", { class: "he-key he-key-prob" }), ` ${gettext("probability (softmax of the raw logits, before temperature and filters)")}`);
    const vocab = logits.vocab_size;
    body.replaceChildren(
      el("p", { class: "he-big" }, fill(ngettext("one score for each of %(n)s token", "one score for each of %(n)s tokens", vocab),
        { n: vocab == null ? "–" : grouped(vocab) })),
      legend, chart, line, ...(step ? [forkRow(this, step, top)] : []),
      caption(sentences([
        fill(gettext("%(where)s: the LM head produced %(count)s logits, one for each token of the vocabulary."), { where, count: int(vocab) }),
        fill(gettext("The %(count)s highest are shown, sorted by raw logit; together they hold %(p)s of the probability."), { count: top.length, p: pct(shownMass) }),
        top.some((t) => t.id === chosen) ? fill(gettext("Outlined: the token this step chose (id %(id)s)."), { id: chosen })
          : chosen != null ? fill(gettext("This step chose id %(id)s, outside these %(count)s."), { id: chosen, count: top.length }) : "",
      ])),
    );
  }
}

define("he-logits", HeLogits);
