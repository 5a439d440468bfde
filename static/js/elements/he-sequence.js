// <he-sequence>: append and loop: the prompt tokens, then one token per step, each fed back in.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { mount, readout, hover, chip, int } from "../lib/widgets.js";
import { plural } from "../lib/plural.js";

class HeSequence extends SteppedElement {
  render(rs) {
    const body = mount(this);
    const n = this.step(rs.steps.length);
    const prompt = rs.prefill?.tokens;
    if (!prompt) { delete this.dataset.length; body.replaceChildren(caption("Waiting for the run: no prompt tokens yet.")); return; }
    const P = prompt.length;
    const step = n ? rs.steps[n - 1] : null;
    this.dataset.length = String(P + n);
    this.dataset.step = String(n);
    const line = readout("Hover or tap a token for its position and id.");
    const inputPos = step?.input?.position;

    const seq = el("div", { class: "he-seq" });
    prompt.forEach((t, i) => {
      const node = chip(t.text, t.id, `he-prompt${t.special ? " he-special" : ""}${i === inputPos ? " he-input" : ""}`);
      hover(node, `position ${i} · prompt token · id ${t.id} · ${showPiece(t.text)}${t.special ? " (special)" : ""}${i === inputPos ? ` · fed to step ${n}` : ""}`, line, false);
      seq.append(node);
    });
    for (let j = 0; j < n; j++) {
      const s = rs.steps[j];
      const pos = P + j;
      const newest = j === n - 1;
      const node = chip(s.token.text, s.token.id,
        `he-gen${s.token.special ? " he-special" : ""}${newest ? " he-newest" : ""}${pos === inputPos ? " he-input" : ""}${s.forced ? " he-fork-mark" : ""}`);
      hover(node, `position ${pos} · chosen at step ${s.step} · id ${s.token.id} · ${showPiece(s.token.text)} · p = ${s.token.prob}`
        + `${s.forced ? " (forced by a fork)" : ""}${newest ? " · the newest token" : ""}`, line, false);
      seq.append(node);
    }

    const forked = rs.steps.find((s) => s.forced);
    if (forked) this.dataset.forkStep = String(forked.step); else delete this.dataset.forkStep;
    const parts = [seq, line];
    if (forked) parts.push(el("p", { class: "he-fork-note" }, `A branch: at step ${forked.step} (position ${P + forked.step - 1}, dashed) the token was chosen by a fork, not sampled; everything after it follows from that choice.`));
    if (step) parts.unshift(loop(step, n, rs));
    const stopped = n === rs.steps.length ? rs.done?.stop_reason ?? step?.stop_reason : null;
    parts.push(caption(step
      ? `This run: ${plural(P, "prompt token")} (positions 0–${P - 1}) + ${int(n)} generated = ${plural(P + n, "token")}. `
        + `Step ${n}'s ${step.forward} forward pass read id ${step.input.id} at position ${step.input.position}; `
        + `the token it chose (highlighted) was appended at position ${P + n - 1}`
        + (stopped ? ` and the run stopped (${stopped}).` : n < rs.steps.length ? ` and fed to step ${n + 1}.` : " and will be fed to the next step.")
      : `The prompt: ${plural(P, "token")} (positions 0–${P - 1}), read by the prefill in one forward pass. No token generated yet.`));
    body.replaceChildren(...parts);
  }
}

/** One turn of the loop for step n: input → forward → sample → append → feed back. */
function loop(step, n, rs) {
  const box = el("ol", { class: "he-loop" });
  const a = el("li");
  a.append("input ", chip(step.input.text, step.input.id, "he-input"), ` at position ${step.input.position}`);
  const b = el("li", {}, `${step.forward} forward pass over ${plural(step.attention?.keys, "cached position")}`);
  const c = el("li");
  c.append("logits → stages → ", step.greedy ? "argmax → " : "dice → ", chip(step.token.text, step.token.id, "he-newest"));
  const d = el("li", {}, `appended at position ${step.input.position + 1}`);
  const last = n === rs.steps.length;
  const stopped = last ? rs.done?.stop_reason ?? step.stop_reason : null;
  const e = el("li", {}, stopped ? `stop: ${stopped}` : last ? "becomes the next step's input" : `input of step ${n + 1}`);
  box.append(a, b, c, d, e);
  return box;
}

define("he-sequence", HeSequence);
