// <he-stream>: detokenize and stream: every step's token id, its piece, and the text it released.
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { readout, hover, chip, int } from "../lib/widgets.js";
import { gettext, ngettext, fill, grouped } from "../lib/i18n.js";

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens". */
const count = (n, text) => fill(text, { n: grouped(n) });
const characters = (n) => count(n, ngettext("%(n)s character", "%(n)s characters", n));

class HeStream extends SteppedElement {
  render(rs) {
    const k = this.step(rs.steps.length); // the page's step: the stream as it stood then (issue 23)
    const steps = rs.steps.slice(0, k), n = rs.steps.length;
    const reply = steps.map((s) => s.text_delta).join("");
    this.dataset.textLength = String([...reply].length); // characters as Python counts them (an emoji is one, not two)
    this.dataset.steps = String(steps.length);
    if (!rs.prefill && !steps.length) { this.root.replaceChildren(caption(gettext("Waiting for the run: no tokens yet."))); return; }
    const line = readout(gettext("Hover or tap a row: the id, the piece decoded alone, and the text the step released."));

    const t = el("table", { class: "he-table he-stream" });
    const thead = el("thead");
    const hr = el("tr");
    for (const h of [gettext("step"), gettext("id"), gettext("piece"), gettext("text released")]) hr.append(el("th", {}, h));
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
          delta.append(el("span", { class: "he-held" }, gettext("\"\" special token: no text")));
          note = gettext("a special token: it adds no text to the reply");
        } else {
          held += 1; pendingHeld += 1;
          delta.append(el("span", { class: "he-held" }, gettext("\"\" held back: incomplete UTF-8")));
          note = gettext("a token was produced but its bytes do not yet form complete UTF-8 characters; they are held until they do");
        }
        r.classList.add("he-held-row");
      } else {
        delta.append(el("span", { class: "he-piece" }, showPiece(s.text_delta)));
        if (pendingHeld) {
          delta.append(el("span", { class: "he-release" }, ` ${fill(gettext("+ %(n)s held"), { n: pendingHeld })}`));
          note = fill(ngettext("completes the bytes held back by the previous %(n)s token", "completes the bytes held back by the previous %(n)s tokens", pendingHeld), { n: pendingHeld });
          pendingHeld = 0;
        } else if (s.text_delta !== s.token.text) {
          differs += 1;
          note = gettext("in context the text differs from the piece decoded alone (e.g. a leading space)");
        }
      }
      r.append(el("td", {}, s.step), el("td", {}, s.token.id), piece, delta);
      const said = fill(gettext("step %(step)s: id %(id)s → piece %(piece)s; text_delta %(delta)s"),
        { step: s.step, id: s.token.id, piece: JSON.stringify(s.token.text), delta: JSON.stringify(s.text_delta) });
      hover(r, `${said}${note ? ` (${note})` : ""}`, line, false);
      tb.append(r);
    }
    t.append(thead, tb);
    const scroll = el("div", { class: "he-scroll capped tall", tabindex: "0", role: "region", "aria-label": gettext("the stream, step by step (scrollable)") });
    scroll.append(t);

    const text = el("div", { class: "he-reply", role: "group", "aria-label": gettext("the whole reply") });
    text.textContent = reply;
    let match = "";
    if (rs.done && k === n) {
      match = ` ${rs.done.text === reply ? gettext("It equals the reply the server reported when the run ended.")
        : rs.done.stop_reason === "stop_string" ? gettext("The reply the server reported at the end is cut before the stop string.")
          : gettext("It differs from the reply the server reported at the end (done.text).")}`;
    }
    this.root.replaceChildren(scroll,
      el("p", { class: "he-col-sub" }, fill(gettext("the reply after step %(step)s of %(steps)s: %(chars)s from %(tokens)s"),
        { step: int(k), steps: int(n), chars: characters(reply.length), tokens: count(steps.length, ngettext("%(n)s token", "%(n)s tokens", steps.length)) })),
      text, line,
      caption(`${gettext("Each step's token id is turned back into text: \"piece\" is the token decoded alone, \"text released\" is the step's text_delta, the newly complete text.")} `
        + fill(gettext("Up to step %(step)s of this run, %(steps)s released %(chars)s"),
          { step: int(k), steps: count(steps.length, ngettext("%(n)s step", "%(n)s steps", steps.length)), chars: characters(reply.length) })
        + `; ${held ? fill(ngettext("%(n)s step released nothing while bytes were held back until the UTF-8 was complete",
          "%(n)s steps released nothing while bytes were held back until the UTF-8 was complete", held), { n: held }) : gettext("no step had to hold bytes back")}`
        + `${differs ? `; ${fill(ngettext("in %(n)s step the released text differs from the piece alone", "in %(n)s steps the released text differs from the piece alone", differs), { n: differs })}` : ""}.${match}`));
    if (this.isConnected) scroll.scrollTop = scroll.scrollHeight; // the step shown is the last row
  }
}

define("he-stream", HeStream);
