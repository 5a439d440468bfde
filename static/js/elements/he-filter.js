// <he-filter>: top-k, top-p and min-p on one step: which candidates survive each filter.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { mount, readout, hover, chip, textsOf, linkIds, int, forkRow } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

const FILTERS = ["top_k", "top_p", "min_p"];
const RULE = {  // called at render time: the rule in the reader's language
  top_k: (v) => fill(ngettext("keep the %(n)s highest-scoring token", "keep the %(n)s highest-scoring tokens", v), { n: v == null ? "–" : grouped(v) }),
  top_p: (v) => fill(gettext("keep the smallest set of most likely tokens whose probability adds up to %(p)s"), { p: v }),
  min_p: (v) => fill(gettext("keep tokens whose probability is at least %(p)s × the top token's"), { p: v }),
};
const OFF = { top_k: gettext_noop("0 = off"), top_p: gettext_noop("1.0 = off"), min_p: gettext_noop("0 = off") };

class HeFilter extends SteppedElement {
  render(rs) {
    if (!this.linked) { this.linked = true; linkIds(this); }
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    if (!step) { delete this.dataset.survivors; body.replaceChildren(caption(gettext("Waiting for the run: the filters run once a step samples."))); return; }
    const stages = step.stages;
    const vocab = step.logits.vocab_size;
    const last = [...stages].reverse().find((s) => s.applied) || stages[stages.length - 1];
    this.dataset.survivors = String(last ? last.survivors : vocab);
    this.dataset.step = String(n);
    const texts = textsOf(step.logits.top, step.probs);
    const params = rs.session?.params || {};
    const line = readout(gettext("Hover or tap a chip for its logit after the filter."));
    const list = el("div", { class: "he-filters" });

    for (const name of FILTERS) {
      const i = stages.findIndex((s) => s.name === name);
      if (i < 0) continue;
      const s = stages[i];
      const before = i > 0 ? stages[i - 1] : { survivors: vocab, top: step.logits.top.map((x) => ({ id: x.id, value: x.logit })) };
      const keptIds = new Map(s.top.filter((x) => x.value != null).map((x) => [x.id, x.value]));
      const row = el("section", { class: `he-filter${s.applied ? "" : " he-off"}`, "data-stage": name });
      const head = el("div", { class: "he-filter-head" });
      const v = params[name];
      head.append(el("b", {}, `${name} = ${v ?? "?"}`),
        el("span", { class: "he-filter-count" },
          s.applied ? fill(ngettext("%(before)s → %(n)s survive", "%(before)s → %(n)s survive", s.survivors), { before: int(before.survivors), n: int(s.survivors) })
            : fill(ngettext("off (%(off)s): %(n)s pass", "off (%(off)s): %(n)s pass", s.survivors), { off: gettext(OFF[name]), n: int(s.survivors) })));
      row.append(head, el("div", { class: "he-col-sub" }, s.applied ? RULE[name](v) : gettext("this run did not apply it")));
      const chips = el("div", { class: "he-chips" });
      let keptShown = 0;
      for (const c of before.top) {
        if (c.value == null) continue; // already removed by an earlier stage
        const kept = keptIds.has(c.id);
        keptShown += kept ? 1 : 0;
        const text = texts.get(c.id);
        const node = chip(text ?? `id ${c.id}`, text == null ? null : c.id, kept ? "he-kept" : "he-cut");
        const values = { token: `${text == null ? "" : showPiece(text) + " "}(id ${c.id})`, before: fmt(c.value, 4), filter: name, after: fmt(keptIds.get(c.id), 4) };
        hover(node, fill(kept ? gettext("%(token)s: logit %(before)s before %(filter)s; kept (logit %(after)s)")
          : gettext("%(token)s: logit %(before)s before %(filter)s; removed by %(filter)s (−∞)"), values), line);
        chips.append(node);
      }
      roving(chips.children); // a filter's chips are one tab stop; arrow keys go from chip to chip
      const rest = s.survivors - keptShown;
      if (rest > 0) chips.append(el("span", { class: "he-more" }, fill(ngettext("+ %(n)s more kept", "+ %(n)s more kept", rest), { n: int(rest) })));
      const gone = before.survivors - s.survivors;
      if (gone > 0) chips.append(el("span", { class: "he-more he-more-cut" }, fill(ngettext("%(n)s removed in all", "%(n)s removed in all", gone), { n: int(gone) })));
      row.append(chips);
      list.append(row);
    }

    const applied = FILTERS.filter((f) => stages.find((s) => s.name === f)?.applied);
    const left = last ? last.survivors : vocab;
    body.replaceChildren(
      el("p", { class: "he-big" }, fill(ngettext("%(survivors)s of %(n)s token can be drawn", "%(survivors)s of %(n)s tokens can be drawn", vocab),
        { survivors: int(left), n: grouped(vocab) })),
      list, line, forkRow(this, step, (last?.top || []).filter((x) => x.value != null).map((x) => ({ id: x.id, text: texts.get(x.id) }))),
      caption(sentences([
        applied.length ? fill(gettext("Step %(step)s: this run applied %(filters)s."), { step: n, filters: applied.join(", ") })
          : fill(gettext("Step %(step)s: no filter was applied on this run."), { step: n }),
        gettext("Chips are the most likely candidates before each filter: kept ones stay, removed ones are struck out (their logit became −∞, so their probability is 0)."),
        fill(ngettext("After the last applied stage (%(stage)s) %(n)s token were left for the dice.", "After the last applied stage (%(stage)s) %(n)s tokens were left for the dice.", left),
          { stage: last ? last.name : gettext("none"), n: grouped(left) }),
      ])),
    );
  }
}

define("he-filter", HeFilter);
