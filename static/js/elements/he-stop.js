// <he-stop>: why the run stopped: every stop condition with its numbers, the one that fired highlighted.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { readout, hover, chip, pct, int } from "../lib/widgets.js";
import { gettext, ngettext, fill, grouped } from "../lib/i18n.js";

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens" ("– tokens" if unknown). */
const count = (n, text) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });
const steps = (n) => count(n, ngettext("%(n)s step", "%(n)s steps", n));
const positions = (n) => count(n, ngettext("%(n)s position", "%(n)s positions", n));

/** A translated sentence as parts, `node` in place of its %(chip)s. */
function withChip(text, values, node) {
  const [before, after = ""] = fill(text, { ...values, chip: "\u0000" }).split("\u0000");
  return [before, node, after].filter((part) => part !== "");
}

class HeStop extends SteppedElement {
  render(rs) {
    const n = this.step(rs.steps.length);  // the run as it stood after the page's step: stopped only at its end
    const last = n ? rs.steps[n - 1] : null;
    const reason = n === rs.steps.length ? rs.done?.stop_reason ?? last?.stop_reason ?? "" : "";
    this.dataset.stopReason = reason;
    if (!rs.session && !rs.prefill) { this.root.replaceChildren(caption(gettext("Waiting for the run."))); return; }
    const params = rs.session?.params || {};
    const P = rs.prefill?.tokens?.length ?? 0;
    const W = last?.kv?.context_window ?? rs.prefill?.kv?.context_window ?? rs.session?.model?.context_window;
    const line = readout(gettext("Hover or tap a condition for its numbers."));
    const list = el("ul", { class: "he-conds" });

    const add = (name, title, detail, meter, why) => {
      const fired = name === reason;
      const li = el("li", { class: `he-cond${fired ? " he-fired" : ""}`, "data-reason": name });
      const head = el("div", { class: "he-cond-head" });
      head.append(el("span", { class: "he-cond-mark" }, fired ? "●" : "○"), el("b", { translate: "no" }, name), el("span", { class: "he-cond-title" }, title),
        el("span", { class: "he-cond-state" }, fired ? gettext("fired") : reason ? gettext("did not fire") : gettext("not yet")));
      li.append(head);
      if (detail) li.append(detail);
      if (meter) li.append(meter);
      hover(li, why, line);
      list.append(li);
    };

    const eosDetail = el("p");
    if (reason === "eos" && last) {
      eosDetail.append(...withChip(last.token.special ? gettext("step %(step)s picked %(chip)s (a special token)") : gettext("step %(step)s picked %(chip)s"),
        { step: n }, chip(last.token.text, last.token.id, "he-chosen")));
    } else {
      eosDetail.append(n === 1 ? gettext("the 1 token chosen was not an end-of-sequence token")
        : n ? fill(gettext("none of the %(tokens)s chosen was an end-of-sequence token"), { tokens: count(n, ngettext("%(n)s token", "%(n)s tokens", n)) })
          : gettext("no token chosen yet"));
    }
    add("eos", gettext("the model chose its end-of-sequence token"), eosDetail, null, reason === "eos" && last
      ? fill(gettext("the end-of-sequence token %(piece)s (id %(id)s) was chosen at step %(step)s"), { piece: showPiece(last.token.text), id: last.token.id, step: n })
      : gettext("fires when the chosen token is one of the model's end-of-sequence tokens"));

    const stops = params.stop || [];
    const stopDetail = el("p");
    if (!stops.length) stopDetail.append(gettext("no stop strings were set on this run"));
    else { stopDetail.append(gettext("watching for ")); stops.forEach((s, i) => stopDetail.append(i ? ", " : "", chip(s, null))); }
    add("stop_string", gettext("the text contains a stop string"), stopDetail, null,
      stops.length ? fill(gettext("stop strings: %(list)s"), { list: stops.map((s) => JSON.stringify(s)).join(", ") }) : gettext("params.stop is empty"));

    const M = params.max_new_tokens;
    add("max_new_tokens", gettext("the step budget ran out"), el("p", {}, fill(gettext("%(steps)s of max_new_tokens = %(max)s"), { steps: steps(n), max: int(M) })),
      M ? meter(n / M) : null, fill(gettext("%(n)s of %(max)s (%(pct)s)"), { n, max: count(M, ngettext("%(n)s new token", "%(n)s new tokens", M)), pct: pct(M ? n / M : NaN) }));

    const L = P + n;
    const sequence = { prompt: int(P), steps: int(n), tokens: count(L, ngettext("%(n)s token", "%(n)s tokens", L)), positions: positions(W), cached: positions(last?.kv.seq_len) };
    add("context_window", gettext("the sequence reached the context window"),
      el("p", {}, fill(last ? gettext("sequence %(prompt)s + %(steps)s = %(tokens)s of %(positions)s (KV cache: %(cached)s)")
        : gettext("sequence %(prompt)s + %(steps)s = %(tokens)s of %(positions)s"), sequence)),
      W ? meter(L / W) : null, fill(gettext("%(n)s of %(max)s (%(pct)s)"), { n: L, max: positions(W), pct: pct(W ? L / W : NaN) }));

    add("stopped", gettext("the visitor pressed stop"), el("p", {}, reason === "stopped" ? fill(gettext("stopped after step %(step)s"), { step: n }) : gettext("the visitor did not stop this run")), null,
      gettext("fires when the page sends a stop message"));

    const later = n < rs.steps.length;  // the page shows an earlier step of a run that went on
    const head = el("p", { class: "he-big" }, reason ? fill(gettext("stopped by: %(reason)s"), { reason })
      : later ? fill(gettext("after step %(step)s: no condition has fired yet"), { step: n }) : gettext("still running: no condition has fired yet"));
    this.root.replaceChildren(head, list, line,
      caption(reason
        ? fill(gettext("This run stopped after %(steps)s because %(why)s. After every step the server checks eos, stop_string, max_new_tokens and context_window in this order; the first that holds ends the run."),
          { steps: steps(n), why: explain(reason) })
        : fill(gettext("After %(steps)s none of the conditions holds yet; each is checked after every step."), { steps: steps(n) })
          + (later ? ` ${fill(gettext("The run went on to step %(step)s."), { step: int(rs.steps.length) })}` : "")));
  }
}

function meter(fraction) {
  const track = el("div", { class: "he-btrack" });
  track.append(el("div", { class: "he-bbar", style: `width:${Math.min(1, Math.max(0, fraction)) * 100}%` }));
  return track;
}

function explain(reason) {
  return {
    eos: gettext("the model chose an end-of-sequence token"),
    stop_string: gettext("the text produced a stop string"),
    max_new_tokens: gettext("it used its whole max_new_tokens budget"),
    context_window: gettext("the sequence filled the context window"),
    stopped: gettext("the visitor stopped it"),
  }[reason] || fill(gettext("of %(reason)s"), { reason });
}

define("he-stop", HeStop);
