// <he-tokens>: the prompt as the tokenizer cut it: one chip per token with its piece and id.
// Reads prefill.tokens[{id, text, bytes, special}], prefill.template.text, prefill.timing.tokenize_ms.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { plural, noun } from "../lib/plural.js";

const hex = (arr) => [...arr].map((b) => b.toString(16).padStart(2, "0")).join(" ");

class HeTokens extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre) {
      this.removeAttribute("data-token-count");
      this.root.replaceChildren(el("p", { class: "he-empty" }, "Press play: the prompt's tokens appear here."));
      return;
    }
    const tokens = pre.tokens || [];
    const text = pre.template?.text || "";
    const utf8 = new TextEncoder().encode(text);
    const chars = [...text].length;
    this.setAttribute("data-token-count", String(tokens.length));

    const count = el("p", { class: "he-bignum" });
    count.append(el("strong", { class: "he-count" }, tokens.length), ` ${noun(tokens.length, "token")} from ${plural(chars, "character")} (${plural(utf8.length, "byte")})`);

    const list = el("ol", { class: "he-chips", "aria-label": "Prompt tokens" });
    tokens.forEach((t, i) => {
      const b = Array.isArray(t.bytes) ? t.bytes : null;
      const raw = b ? utf8.slice(b[0], b[1]) : null;
      const title = [
        `position ${i}: ${JSON.stringify(t.text)}`,
        `id ${t.id}`,
        b ? `bytes ${b[0]}–${b[1]} of the text` : "no byte offsets",
        raw ? `UTF-8: ${hex(raw) || "(none)"}` : null,
        t.special ? "special token" : null,
      ].filter(Boolean).join(" · ");
      const chip = el("li", { class: `he-chip stacked${t.special ? " special" : ""}`, title, "data-position": i });
      chip.append(el("span", { class: "he-piece" }, showPiece(t.text)), el("span", { class: "he-id" }, t.id));
      list.append(chip);
    });

    const specials = tokens.filter((t) => t.special).length;
    const ratio = tokens.length ? chars / tokens.length : NaN;
    const ms = pre.timing?.tokenize_ms;
    this.root.replaceChildren(count, list, caption(
      `Measured on this run: ${plural(chars, "character")} became ${plural(tokens.length, "token")}, ${fmt(ratio, 2)} characters per token` +
      `${specials ? ` (${specials} of the tokens are special markers)` : ""}.` +
      (ms != null ? ` Template and tokenizer took ${fmt(ms, 1)} ms.` : "") +
      " Hover a chip for its byte range and bytes.",
    ));
  }
}

define("he-tokens", HeTokens);
