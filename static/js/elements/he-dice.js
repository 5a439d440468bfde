// <he-dice>: the dice roll of one step: the cumulative distribution (tokens sorted by probability)
// and where u landed on it; greedy steps take the argmax without dice.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { mount, readout, hover, chip, pct, int, forkRow } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { decimal, fill, gettext, grouped } from "../lib/i18n.js";

/** u, a cumulative bound or a probability as sent (6 decimals at most), in the reader's way of writing numbers. */
const exact = (x) => grouped(x, 6);

class HeDice extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    if (!step) { delete this.dataset.u; body.replaceChildren(caption(gettext("Waiting for the run: the dice are rolled at every step."))); return; }
    const draw = step.draw;
    this.dataset.u = draw ? String(draw.u) : "greedy";
    this.dataset.step = String(n);
    const line = readout(gettext("Hover or tap a segment for its probability and cumulative range."));
    const segs = segments(step);
    const chosen = segs.find((s) => s.chosen);

    const parts = [];
    const head = el("p", { class: "he-big" });
    if (step.greedy || !draw) {
      head.append(`${gettext("temperature 0: argmax, no dice →")} `, chip(step.token.text, step.token.id, "he-chosen"));
    } else {
      head.append(`u = ${exact(draw.u)} → `, chip(step.token.text, step.token.id, "he-chosen"));
    }
    parts.push(head);
    parts.push(bar(segs, 0, 1, draw?.u, line, "0", "1"));
    if (draw && chosen && chosen.b - chosen.a < 0.04) {
      const w = Math.max(0.02, 3 * (chosen.b - chosen.a));
      const lo = Math.max(0, chosen.a - w), hi = Math.min(1, chosen.b + w);
      parts.push(el("p", { class: "he-col-sub" }, fill(gettext("zoomed in on %(lo)s … %(hi)s:"), { lo: decimal(lo, 3), hi: decimal(hi, 3) })));
      parts.push(bar(segs, lo, hi, draw.u, line, decimal(lo, 3), decimal(hi, 3)));
    }
    parts.push(table(segs, line));
    const sentence = el("p", { class: "he-dice-says" });
    const values = { u: exact(draw?.u), before: exact(draw?.cumulative_before), after: exact(draw?.cumulative_after), rank: (draw?.rank ?? 0) + 1, p: pct(step.token.prob) };
    const says = draw ? fellBetween(draw.rank + 1)
      : gettext("Temperature 0: the highest logit wins outright, %(token)s (p = %(p)s); no dice were rolled.");
    sentence.append(...withChip(fill(says, { ...values, token: "%(token)s" }), chip(step.token.text, step.token.id)));
    if (step.forced) sentence.append(` ${gettext("This token was then replaced by a fork: it was forced, not sampled.")}`);
    parts.push(sentence, line, forkRow(this, step, step.probs));
    parts.push(caption(draw
      ? `${fill(gettext("Step %(step)s: tokens sorted by their final probability are laid end to end from 0 to 1; the server rolled u = %(u)s "
        + "(it depends only on the seed %(seed)s and the step number) and took the token whose slice contains u."), { step: n, u: exact(draw.u), seed: rs.session?.params?.seed ?? "?" })} `
        + fill(gettext("The %(shown)s most likely tokens are drawn; the grey rest holds the other %(rest)s."),
          { shown: step.probs.length, rest: int(step.logits.vocab_size - step.probs.length) })
      : fill(gettext("Step %(step)s: this run used temperature 0, so the token with the highest logit was taken without a dice roll."), { step: n })));
    body.replaceChildren(...parts);
  }
}

/** Slices of [0, 1]: the listed tokens, the chosen one wherever it is, and the rest. */
function segments(step) {
  const draw = step.draw;
  const out = [];
  let c = 0;
  step.probs.forEach((p, rank) => {
    const chosen = draw ? rank === draw.rank : p.id === step.token.id;
    out.push({ a: c, b: c + p.prob, id: p.id, text: p.text, prob: p.prob, rank, chosen });
    c += p.prob;
  });
  if (draw && draw.rank >= step.probs.length) {
    const before = Math.max(c, draw.cumulative_before);
    if (before > c) out.push({ a: c, b: before, rest: fill(gettext("ranks %(first)s–%(last)s"), { first: step.probs.length + 1, last: draw.rank }) });
    out.push({ a: before, b: draw.cumulative_after, id: step.token.id, text: step.token.text, prob: step.token.prob, rank: draw.rank, chosen: true });
    c = draw.cumulative_after;
  }
  if (c < 1) out.push({ a: c, b: 1, rest: gettext("every other token") });
  return out;
}

function bar(segs, lo, hi, u, line, loLabel, hiLabel) {
  const wrap = el("div", { class: "he-dicebar-wrap" });
  const barNode = el("div", { class: "he-dicebar" });
  const span = hi - lo;
  segs.forEach((s, i) => {
    const a = Math.max(s.a, lo), b = Math.min(s.b, hi);
    if (b <= a) return;
    const width = ((b - a) / span) * 100;
    const cls = s.rest ? "he-seg he-seg-rest" : `he-seg he-seg-${i % 2 ? "b" : "a"}${s.chosen ? " he-seg-chosen" : ""}`;
    const piece = s.rest ? "" : showPiece(s.text);
    // --w and --chars let elements.css shrink the piece to the segment's width instead of cutting it off.
    const node = el("div", { class: cls, style: `left:${((a - lo) / span) * 100}%;width:${width}%;--w:${width};--chars:${[...piece].length}` });
    if (width > 7 && !s.rest) node.textContent = piece;
    const range = { from: decimal(s.a, 6), to: decimal(s.b, 6) };
    const what = s.rest ? `${s.rest}: ${range.from} … ${range.to} (${pct(s.b - s.a)})`
      : fill(s.chosen ? gettext("rank %(rank)s: %(token)s (id %(id)s) p = %(p)s, covers %(from)s … %(to)s (chosen)")
        : gettext("rank %(rank)s: %(token)s (id %(id)s) p = %(p)s, covers %(from)s … %(to)s"), { rank: s.rank + 1, token: showPiece(s.text), id: s.id, p: exact(s.prob), ...range });
    hover(node, what, line, false);
    barNode.append(node);
  });
  roving(barNode.children); // the strip is one tab stop; arrow keys go from slice to slice
  if (u != null && u >= lo && u <= hi) {
    const x = ((u - lo) / span) * 100;
    const mark = el("div", { class: "he-umark", style: `left:${x}%` });
    const side = x > 70 ? " he-ulabel-left" : x < 30 ? " he-ulabel-right" : ""; // kept inside the bar at either end
    const label = el("div", { class: `he-ulabel${side}`, style: `left:${x}%` }, `u = ${exact(u)}`);
    wrap.append(label);
    barNode.append(mark);
  }
  const axis = el("div", { class: "he-axis" });
  axis.append(el("span", {}, loLabel), el("span", {}, hiLabel));
  wrap.append(barNode, axis);
  return wrap;
}

function table(segs, line) {
  const t = el("table", { class: "he-table" });
  const hr = el("tr");
  for (const h of [gettext("rank"), gettext("token"), "p", gettext("cumulative")]) hr.append(el("th", {}, h));
  const thead = el("thead");
  thead.append(hr);
  t.append(thead);
  const tb = el("tbody");
  for (const s of segs) {
    if (s.rest) { const r = el("tr", { class: "he-rest-row" }); r.append(el("td", { colspan: "4" }, `${s.rest}: ${pct(s.b - s.a)}`)); tb.append(r); continue; }
    const r = el("tr", { class: s.chosen ? "he-chosen-row" : "" });
    const tok = el("td");
    tok.append(chip(s.text, s.id));
    r.append(el("td", {}, s.rank + 1), tok, el("td", {}, pct(s.prob)), el("td", {}, `${decimal(s.a, 4)} – ${decimal(s.b, 4)}`));
    hover(r, fill(gettext("rank %(rank)s: %(token)s p = %(p)s"), { rank: s.rank + 1, token: showPiece(s.text), p: exact(s.prob) }), line, false);
    tb.append(r);
  }
  roving(tb.querySelectorAll("tr[title]"));
  t.append(tb);
  return t;
}

/** Where u fell, with the English ordinal of rank `k` (1st, 2nd, 3rd, 4th …); %(token)s is the chosen chip. */
function fellBetween(k) {
  const s = k % 100 >= 11 && k % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][k % 10] || "th";
  if (s === "st") return gettext("u = %(u)s fell between %(before)s and %(after)s: the %(rank)sst most likely token, %(token)s (p = %(p)s).");
  if (s === "nd") return gettext("u = %(u)s fell between %(before)s and %(after)s: the %(rank)snd most likely token, %(token)s (p = %(p)s).");
  if (s === "rd") return gettext("u = %(u)s fell between %(before)s and %(after)s: the %(rank)srd most likely token, %(token)s (p = %(p)s).");
  return gettext("u = %(u)s fell between %(before)s and %(after)s: the %(rank)sth most likely token, %(token)s (p = %(p)s).");
}

/** A translated sentence with its %(token)s placeholder replaced by `node` (a chip): [text, node, text]. */
function withChip(text, node) {
  const at = text.indexOf("%(token)s");
  return at < 0 ? [text, node] : [text.slice(0, at), node, text.slice(at + "%(token)s".length)];
}

define("he-dice", HeDice);
