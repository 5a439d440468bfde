// <he-stop>: why the run stopped: every stop condition with its numbers, the one that fired highlighted.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { readout, hover, chip, pct, int } from "../lib/widgets.js";
import { plural } from "../lib/plural.js";

class HeStop extends SteppedElement {
  render(rs) {
    const n = this.step(rs.steps.length);  // the run as it stood after the page's step: stopped only at its end
    const last = n ? rs.steps[n - 1] : null;
    const reason = n === rs.steps.length ? rs.done?.stop_reason ?? last?.stop_reason ?? "" : "";
    this.dataset.stopReason = reason;
    if (!rs.session && !rs.prefill) { this.root.replaceChildren(caption("Waiting for the run.")); return; }
    const params = rs.session?.params || {};
    const P = rs.prefill?.tokens?.length ?? 0;
    const W = last?.kv?.context_window ?? rs.prefill?.kv?.context_window ?? rs.session?.model?.context_window;
    const line = readout("Hover or tap a condition for its numbers.");
    const list = el("ul", { class: "he-conds" });

    const add = (name, title, detail, meter, why) => {
      const fired = name === reason;
      const li = el("li", { class: `he-cond${fired ? " he-fired" : ""}`, "data-reason": name });
      const head = el("div", { class: "he-cond-head" });
      head.append(el("span", { class: "he-cond-mark" }, fired ? "●" : "○"), el("b", {}, name), el("span", { class: "he-cond-title" }, title),
        el("span", { class: "he-cond-state" }, fired ? "fired" : reason ? "did not fire" : "not yet"));
      li.append(head);
      if (detail) li.append(detail);
      if (meter) li.append(meter);
      hover(li, why, line);
      list.append(li);
    };

    const eosDetail = el("p");
    if (reason === "eos" && last) eosDetail.append(`step ${n} picked `, chip(last.token.text, last.token.id, "he-chosen"), last.token.special ? " (a special token)" : "");
    else eosDetail.append(n === 1 ? "the 1 token chosen was not an end-of-sequence token"
      : n ? `none of the ${plural(n, "token")} chosen was an end-of-sequence token` : "no token chosen yet");
    add("eos", "the model chose its end-of-sequence token", eosDetail, null,
      reason === "eos" && last ? `the end-of-sequence token ${showPiece(last.token.text)} (id ${last.token.id}) was chosen at step ${n}` : "fires when the chosen token is one of the model's end-of-sequence tokens");

    const stops = params.stop || [];
    const stopDetail = el("p");
    if (!stops.length) stopDetail.append("no stop strings were set on this run");
    else { stopDetail.append("watching for "); stops.forEach((s, i) => stopDetail.append(i ? ", " : "", chip(s, null))); }
    add("stop_string", "the text contains a stop string", stopDetail, null,
      stops.length ? `stop strings: ${stops.map((s) => JSON.stringify(s)).join(", ")}` : "params.stop is empty");

    const M = params.max_new_tokens;
    add("max_new_tokens", "the step budget ran out", el("p", {}, `${plural(n, "step")} of max_new_tokens = ${int(M)}`),
      M ? meter(n / M) : null, `${n} of ${plural(M, "new token")} (${pct(M ? n / M : NaN)})`);

    const L = P + n;
    add("context_window", "the sequence reached the context window",
      el("p", {}, `sequence ${int(P)} + ${int(n)} = ${plural(L, "token")} of ${plural(W, "position")}`
        + (last ? ` (KV cache: ${plural(last.kv.seq_len, "position")})` : "")),
      W ? meter(L / W) : null, `${L} of ${plural(W, "position")} (${pct(W ? L / W : NaN)})`);

    add("stopped", "the visitor pressed stop", el("p", {}, reason === "stopped" ? `stopped after step ${n}` : "the visitor did not stop this run"), null,
      "fires when the page sends a stop message");

    const later = n < rs.steps.length;  // the page shows an earlier step of a run that went on
    const head = el("p", { class: "he-big" }, reason ? `stopped by: ${reason}` : later ? `after step ${n}: no condition has fired yet` : "still running: no condition has fired yet");
    this.root.replaceChildren(head, list, line,
      caption(reason
        ? `This run stopped after ${plural(n, "step")} because ${explain(reason)}. After every step the server checks eos, stop_string, max_new_tokens and context_window in this order; the first that holds ends the run.`
        : `After ${plural(n, "step")} none of the conditions holds yet; each is checked after every step.`
          + (later ? ` The run went on to step ${int(rs.steps.length)}.` : "")));
  }
}

function meter(fraction) {
  const track = el("div", { class: "he-btrack" });
  track.append(el("div", { class: "he-bbar", style: `width:${Math.min(1, Math.max(0, fraction)) * 100}%` }));
  return track;
}

function explain(reason) {
  return {
    eos: "the model chose an end-of-sequence token",
    stop_string: "the text produced a stop string",
    max_new_tokens: "it used its whole max_new_tokens budget",
    context_window: "the sequence filled the context window",
    stopped: "the visitor stopped it",
  }[reason] || `of ${reason}`;
}

define("he-stop", HeStop);
