// <he-filter>: top-k, top-p and min-p on one step: which candidates survive each filter.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { mount, readout, hover, chip, textsOf, linkIds, int, forkRow } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { plural } from "../lib/plural.js";

const FILTERS = ["top_k", "top_p", "min_p"];
const RULE = {
  top_k: (v) => `keep the ${plural(v, "highest-scoring token")}`,
  top_p: (v) => `keep the smallest set of most likely tokens whose probability adds up to ${v}`,
  min_p: (v) => `keep tokens whose probability is at least ${v} × the top token's`,
};
const OFF = { top_k: "0 = off", top_p: "1.0 = off", min_p: "0 = off" };

class HeFilter extends SteppedElement {
  render(rs) {
    if (!this.linked) { this.linked = true; linkIds(this); }
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    if (!step) { delete this.dataset.survivors; body.replaceChildren(caption("Waiting for the run: the filters run once a step samples.")); return; }
    const stages = step.stages;
    const vocab = step.logits.vocab_size;
    const last = [...stages].reverse().find((s) => s.applied) || stages[stages.length - 1];
    this.dataset.survivors = String(last ? last.survivors : vocab);
    this.dataset.step = String(n);
    const texts = textsOf(step.logits.top, step.probs);
    const params = rs.session?.params || {};
    const line = readout("Hover or tap a chip for its logit after the filter.");
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
          s.applied ? `${int(before.survivors)} → ${int(s.survivors)} survive` : `off (${OFF[name]}): ${int(s.survivors)} pass`));
      row.append(head, el("div", { class: "he-col-sub" }, s.applied ? RULE[name](v) : "this run did not apply it"));
      const chips = el("div", { class: "he-chips" });
      let keptShown = 0;
      for (const c of before.top) {
        if (c.value == null) continue; // already removed by an earlier stage
        const kept = keptIds.has(c.id);
        keptShown += kept ? 1 : 0;
        const text = texts.get(c.id);
        const node = chip(text ?? `id ${c.id}`, text == null ? null : c.id, kept ? "he-kept" : "he-cut");
        hover(node, `${text == null ? "" : showPiece(text) + " "}(id ${c.id}): logit ${fmt(c.value, 4)} before ${name}; `
          + (kept ? `kept (logit ${fmt(keptIds.get(c.id), 4)})` : `removed by ${name} (−∞)`), line);
        chips.append(node);
      }
      roving(chips.children); // a filter's chips are one tab stop; arrow keys go from chip to chip
      const rest = s.survivors - keptShown;
      if (rest > 0) chips.append(el("span", { class: "he-more" }, `+ ${int(rest)} more kept`));
      const gone = before.survivors - s.survivors;
      if (gone > 0) chips.append(el("span", { class: "he-more he-more-cut" }, `${int(gone)} removed in all`));
      row.append(chips);
      list.append(row);
    }

    const applied = FILTERS.filter((f) => stages.find((s) => s.name === f)?.applied);
    body.replaceChildren(
      el("p", { class: "he-big" }, `${int(last ? last.survivors : vocab)} of ${plural(vocab, "token")} can be drawn`),
      list, line, forkRow(this, step, (last?.top || []).filter((x) => x.value != null).map((x) => ({ id: x.id, text: texts.get(x.id) }))),
      caption(`Step ${n}: ${applied.length ? `this run applied ${applied.join(", ")}` : "no filter was applied on this run"}. `
        + `Chips are the most likely candidates before each filter: kept ones stay, removed ones are struck out (their logit became −∞, so their probability is 0). `
        + `After the last applied stage (${last ? last.name : "none"}) ${plural(last ? last.survivors : vocab, "token")} were left for the dice.`),
    );
  }
}

define("he-filter", HeFilter);
