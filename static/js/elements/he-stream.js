// <he-stream>: detokenize and stream: every step's token id, its piece, and the text it released.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { readout, hover, chip, int } from "../lib/widgets.js";
import { plural } from "../lib/plural.js";

class HeStream extends SteppedElement {
  render(rs) {
    const k = this.step(rs.steps.length); // the page's step: the stream as it stood then (issue 23)
    const steps = rs.steps.slice(0, k), n = rs.steps.length;
    const reply = steps.map((s) => s.text_delta).join("");
    this.dataset.textLength = String(reply.length);
    this.dataset.steps = String(steps.length);
    if (!rs.prefill && !steps.length) { this.root.replaceChildren(caption("Waiting for the run: no tokens yet.")); return; }
    const line = readout("Hover or tap a row: the id, the piece decoded alone, and the text the step released.");

    const t = el("table", { class: "he-table he-stream" });
    const thead = el("thead");
    const hr = el("tr");
    for (const h of ["step", "id", "piece", "text released"]) hr.append(el("th", {}, h));
    thead.append(hr);
    const tb = el("tbody");
    let held = 0, differs = 0, pendingHeld = 0;
    for (const s of steps) {
      const r = el("tr", s.step === k ? { class: "he-current", "aria-current": "step" } : {});
      const piece = el("td");
      piece.append(chip(s.token.text, null, s.token.special ? "he-special" : ""));
      const delta = el("td", { class: "he-delta" });
      let note;
      if (s.text_delta === "") {
        if (s.token.special) {
          delta.append(el("span", { class: "he-held" }, "\"\" special token: no text"));
          note = "a special token: it adds no text to the reply";
        } else {
          held += 1; pendingHeld += 1;
          delta.append(el("span", { class: "he-held" }, "\"\" held back: incomplete UTF-8"));
          note = "a token was produced but its bytes do not yet form complete UTF-8 characters; they are held until they do";
        }
        r.classList.add("he-held-row");
      } else {
        delta.append(el("span", { class: "he-piece" }, showPiece(s.text_delta)));
        if (pendingHeld) {
          delta.append(el("span", { class: "he-release" }, ` + ${pendingHeld} held`));
          note = `completes the bytes held back by the previous ${pendingHeld} token${pendingHeld > 1 ? "s" : ""}`;
          pendingHeld = 0;
        } else if (s.text_delta !== s.token.text) {
          differs += 1;
          note = "in context the text differs from the piece decoded alone (e.g. a leading space)";
        }
      }
      r.append(el("td", {}, s.step), el("td", {}, s.token.id), piece, delta);
      hover(r, `step ${s.step}: id ${s.token.id} → piece ${JSON.stringify(s.token.text)}; text_delta ${JSON.stringify(s.text_delta)}${note ? ` (${note})` : ""}`, line, false);
      tb.append(r);
    }
    t.append(thead, tb);
    const scroll = el("div", { class: "he-scroll capped tall", tabindex: "0", role: "region", "aria-label": "the stream, step by step (scrollable)" });
    scroll.append(t);

    const text = el("div", { class: "he-reply", "aria-label": "the whole reply" });
    text.textContent = reply;
    let match = "";
    if (rs.done && k === n) {
      match = rs.done.text === reply ? " It equals the reply the server reported when the run ended."
        : rs.done.stop_reason === "stop_string" ? " The reply the server reported at the end is cut before the stop string."
          : " It differs from the reply the server reported at the end (done.text).";
    }
    this.root.replaceChildren(scroll,
      el("p", { class: "he-col-sub" }, `the reply after step ${int(k)} of ${int(n)}: ${plural(reply.length, "character")} from ${plural(steps.length, "token")}`),
      text, line,
      caption(`Each step's token id is turned back into text: "piece" is the token decoded alone, "text released" is the step's text_delta, `
        + `the newly complete text. Up to step ${int(k)} of this run, ${plural(steps.length, "step")} released ${plural(reply.length, "character")}`
        + `${held ? `; ${held} step${held > 1 ? "s" : ""} released nothing while bytes were held back until the UTF-8 was complete` : "; no step had to hold bytes back"}`
        + `${differs ? `; in ${differs} step${differs > 1 ? "s" : ""} the released text differs from the piece alone` : ""}.${match}`));
    if (this.isConnected) scroll.scrollTop = scroll.scrollHeight; // the step shown is the last row
  }
}

define("he-stream", HeStream);
