// <he-sequence>: append and loop: the prompt tokens, then one token per step, each fed back in.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { mount, readout, hover, chip, int } from "../lib/widgets.js";
import { gettext, ngettext, fill, grouped } from "../lib/i18n.js";

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens" ("– tokens" if unknown). */
const count = (n, text) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });

/** A translated sentence as parts, `node` in place of its %(chip)s. */
function withChip(text, values, node) {
  const [before, after = ""] = fill(text, { ...values, chip: "\u0000" }).split("\u0000");
  return [before, node, after].filter((part) => part !== "");
}

class HeSequence extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const prompt = rs.prefill?.tokens;
    if (!prompt) { delete this.dataset.length; body.replaceChildren(caption(gettext("Waiting for the run: no prompt tokens yet."))); return; }
    const P = prompt.length;
    const step = n ? rs.steps[n - 1] : null;
    this.dataset.length = String(P + n);
    this.dataset.step = String(n);
    const line = readout(gettext("Hover or tap a token for its position and id."));
    const inputPos = step?.input?.position;

    const seq = el("div", { class: "he-seq" });
    prompt.forEach((t, i) => {
      const node = chip(t.text, t.id, `he-prompt${t.special ? " he-special" : ""}${i === inputPos ? " he-input" : ""}`);
      const tip = [fill(gettext("position %(pos)s"), { pos: i }), gettext("prompt token"), fill(gettext("id %(id)s"), { id: t.id }),
        t.special ? fill(gettext("%(piece)s (special)"), { piece: showPiece(t.text) }) : showPiece(t.text)];
      if (i === inputPos) tip.push(fill(gettext("fed to step %(step)s"), { step: n }));
      hover(node, tip.join(" · "), line, false);
      seq.append(node);
    });
    for (let j = 0; j < n; j++) {
      const s = rs.steps[j];
      const pos = P + j;
      const newest = j === n - 1;
      const node = chip(s.token.text, s.token.id,
        `he-gen${s.token.special ? " he-special" : ""}${newest ? " he-newest" : ""}${pos === inputPos ? " he-input" : ""}${s.forced ? " he-fork-mark" : ""}`);
      const tip = [fill(gettext("position %(pos)s"), { pos }), fill(gettext("chosen at step %(step)s"), { step: s.step }),
        fill(gettext("id %(id)s"), { id: s.token.id }), showPiece(s.token.text),
        s.forced ? fill(gettext("p = %(p)s (forced by a fork)"), { p: String(s.token.prob) }) : `p = ${s.token.prob}`];
      if (newest) tip.push(gettext("the newest token"));
      hover(node, tip.join(" · "), line, false);
      seq.append(node);
    }

    const forked = rs.steps.find((s) => s.forced);
    if (forked) this.dataset.forkStep = String(forked.step); else delete this.dataset.forkStep;
    const parts = [seq, line];
    if (forked) parts.push(el("p", { class: "he-fork-note" }, fill(gettext("A branch: at step %(step)s (position %(pos)s, dashed) the token was chosen by a fork, not sampled; everything after it follows from that choice."), { step: forked.step, pos: P + forked.step - 1 })));
    if (step) parts.unshift(loop(step, n, rs));
    const stopped = n === rs.steps.length ? rs.done?.stop_reason ?? step?.stop_reason : null;
    parts.push(caption(step ? runCaption(step, n, P, stopped, n < rs.steps.length)
      : fill(gettext("The prompt: %(tokens)s (positions 0–%(last)s), read by the prefill in one forward pass. No token generated yet."),
        { tokens: count(P, ngettext("%(n)s token", "%(n)s tokens", P)), last: P - 1 })));
    body.replaceChildren(...parts);
  }
}

/** The caption at step n of a run with P prompt tokens: the sequence so far, and where the newest token went. */
function runCaption(step, n, P, stopped, more) {
  const values = { step: n, forward: step.forward, id: step.input.id, pos: step.input.position, at: P + n - 1, reason: stopped, next: n + 1 };
  const sums = fill(gettext("This run: %(prompt)s (positions 0–%(last)s) + %(generated)s generated = %(total)s."), {
    prompt: count(P, ngettext("%(n)s prompt token", "%(n)s prompt tokens", P)), last: P - 1, generated: int(n),
    total: count(P + n, ngettext("%(n)s token", "%(n)s tokens", P + n)) });
  const where = stopped
    ? gettext("Step %(step)s's %(forward)s forward pass read id %(id)s at position %(pos)s; the token it chose (highlighted) was appended at position %(at)s and the run stopped (%(reason)s).")
    : more ? gettext("Step %(step)s's %(forward)s forward pass read id %(id)s at position %(pos)s; the token it chose (highlighted) was appended at position %(at)s and fed to step %(next)s.")
      : gettext("Step %(step)s's %(forward)s forward pass read id %(id)s at position %(pos)s; the token it chose (highlighted) was appended at position %(at)s and will be fed to the next step.");
  return `${sums} ${fill(where, values)}`;
}

/** One turn of the loop for step n: input → forward → sample → append → feed back. */
function loop(step, n, rs) {
  const box = el("ol", { class: "he-loop" });
  const a = el("li");
  a.append(...withChip(gettext("input %(chip)s at position %(pos)s"), { pos: step.input.position }, chip(step.input.text, step.input.id, "he-input")));
  const keys = step.attention?.keys;
  const b = el("li", {}, fill(gettext("%(forward)s forward pass over %(positions)s"),
    { forward: step.forward, positions: count(keys, ngettext("%(n)s cached position", "%(n)s cached positions", keys)) }));
  const c = el("li");
  c.append(step.greedy ? gettext("logits → stages → argmax → ") : gettext("logits → stages → dice → "), chip(step.token.text, step.token.id, "he-newest"));
  const d = el("li", {}, fill(gettext("appended at position %(pos)s"), { pos: step.input.position + 1 }));
  const last = n === rs.steps.length;
  const stopped = last ? rs.done?.stop_reason ?? step.stop_reason : null;
  const e = el("li", {}, stopped ? fill(gettext("stop: %(reason)s"), { reason: stopped })
    : last ? gettext("becomes the next step's input") : fill(gettext("input of step %(step)s"), { step: n + 1 }));
  box.append(a, b, c, d, e);
  return box;
}

define("he-sequence", HeSequence);
