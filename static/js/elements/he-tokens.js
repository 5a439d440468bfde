// <he-tokens>: the prompt as the tokenizer cut it: one chip per token with its piece and id.
// Reads prefill.tokens[{id, text, bytes, special}], prefill.template.text, prefill.timing.tokenize_ms.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { gettext, ngettext, fill, grouped } from "../lib/i18n.js";

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens". */
const count = (n, text) => fill(text, { n: grouped(n) });
const characters = (n) => count(n, ngettext("%(n)s character", "%(n)s characters", n));

/** A translated sentence as parts, `node` in place of its %(count)s. */
function withNode(text, values, node) {
  const [before, after = ""] = fill(text, { ...values, count: "\u0000" }).split("\u0000");
  return [before, node, after].filter((part) => part !== "");
}

const hex = (arr) => [...arr].map((b) => b.toString(16).padStart(2, "0")).join(" ");

class HeTokens extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre) {
      this.removeAttribute("data-token-count");
      this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: the prompt's tokens appear here.")));
      return;
    }
    const tokens = pre.tokens || [];
    const text = pre.template?.text || "";
    const utf8 = new TextEncoder().encode(text);
    const chars = [...text].length;
    this.setAttribute("data-token-count", String(tokens.length));

    const big = el("p", { class: "he-bignum" });
    const said = ngettext("%(count)s token from %(chars)s (%(bytes)s)", "%(count)s tokens from %(chars)s (%(bytes)s)", tokens.length);
    big.append(...withNode(said, { chars: characters(chars), bytes: count(utf8.length, ngettext("%(n)s byte", "%(n)s bytes", utf8.length)) },
      el("strong", { class: "he-count" }, tokens.length)));

    const list = el("ol", { class: "he-chips", "aria-label": gettext("Prompt tokens") });
    tokens.forEach((t, i) => {
      const b = Array.isArray(t.bytes) ? t.bytes : null;
      const raw = b ? utf8.slice(b[0], b[1]) : null;
      const title = [
        fill(gettext("position %(pos)s: %(text)s"), { pos: i, text: JSON.stringify(t.text) }),
        fill(gettext("id %(id)s"), { id: t.id }),
        b ? fill(gettext("bytes %(start)s–%(end)s of the text"), { start: b[0], end: b[1] }) : gettext("no byte offsets"),
        raw ? `UTF-8: ${hex(raw) || gettext("(none)")}` : null,
        t.special ? gettext("special token") : null,
      ].filter(Boolean).join(" · ");
      const chip = el("li", { class: `he-chip stacked${t.special ? " special" : ""}`, title, "data-position": i });
      chip.append(el("span", { class: "he-piece" }, showPiece(t.text)), el("span", { class: "he-id" }, t.id));
      list.append(chip);
    });

    const specials = tokens.filter((t) => t.special).length;
    const ratio = tokens.length ? chars / tokens.length : NaN;
    const ms = pre.timing?.tokenize_ms;
    const values = { chars: characters(chars), tokens: count(tokens.length, ngettext("%(n)s token", "%(n)s tokens", tokens.length)), ratio: fmt(ratio, 2), specials };
    this.root.replaceChildren(big, list, caption(
      fill(specials ? gettext("Measured on this run: %(chars)s became %(tokens)s, %(ratio)s characters per token (%(specials)s of the tokens are special markers).")
        : gettext("Measured on this run: %(chars)s became %(tokens)s, %(ratio)s characters per token."), values) +
      (ms != null ? ` ${fill(gettext("Template and tokenizer took %(ms)s ms."), { ms: fmt(ms, 1) })}` : "") +
      ` ${gettext("Hover a chip for its byte range and bytes.")}`,
    ));
  }
}

define("he-tokens", HeTokens);
