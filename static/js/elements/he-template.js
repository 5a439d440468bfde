// <he-template>: the chat template's output, the one string the model reads.
// Reads prefill.template {text, source, spans[{role, start, end}]} and prefill.tokens[{bytes, special, id, text}].
import { SteppedElement, define, el, caption, showPiece } from "../lib/base-element.js";
import { typedSpans, typedMessages } from "../lib/spans.js";
import { gettext, ngettext, fill, grouped } from "../lib/i18n.js";

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens". */
const count = (n, text) => fill(text, { n: grouped(n) });
const characters = (n) => count(n, ngettext("%(n)s character", "%(n)s characters", n));

// "template": text the template adds on its own (a default system prompt, a date line), drawn as "added by the template".
const ROLE_CLASS = { system: "role-system", user: "role-user", assistant: "role-assistant", template: "role-none" };

/** Maps from code-point index and UTF-8 byte offset to JS string (UTF-16) index. */
function offsetMaps(text) {
  const cpToJs = [];
  const byteToJs = new Map();
  let js = 0;
  let byte = 0;
  for (const ch of text) {
    cpToJs.push(js);
    byteToJs.set(byte, js);
    const cp = ch.codePointAt(0);
    byte += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    js += ch.length;
  }
  cpToJs.push(js);
  byteToJs.set(byte, js);
  return { cpToJs, byteToJs, chars: cpToJs.length - 1 };
}

class HeTemplate extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre) { this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: the template's output appears here."))); return; }
    this.dataset.textLength = String([...pre.template.text].length);  // what the model reads, in characters (an emoji is one)
    const { text, source, spans = [] } = pre.template;
    const tokens = pre.tokens || [];
    const maps = offsetMaps(text);

    // Role spans are code-point offsets; special tokens are UTF-8 byte ranges. Both become JS indices.
    const roles = spans.map((s) => ({ role: s.role, start: maps.cpToJs[s.start] ?? 0, end: maps.cpToJs[s.end] ?? text.length, cp: s }));
    const specials = tokens.filter((t) => t.special && Array.isArray(t.bytes))
      .map((t) => ({ start: maps.byteToJs.get(t.bytes[0]), end: maps.byteToJs.get(t.bytes[1]), token: t }))
      .filter((s) => s.start != null && s.end != null && s.end > s.start);

    const cuts = new Set([0, text.length]);
    for (const r of [...roles, ...specials]) { cuts.add(r.start); cuts.add(r.end); }
    const points = [...cuts].filter((c) => c >= 0 && c <= text.length).sort((a, b) => a - b);

    const out = el("pre", { class: "he-template-text", "aria-label": gettext("The text the model reads") });
    for (let i = 0; i < points.length - 1; i++) {
      const a = points[i], b = points[i + 1];
      if (b <= a) continue;
      const role = roles.find((r) => r.start <= a && b <= r.end);
      const special = specials.find((s) => s.start <= a && b <= s.end);
      const cls = [role ? ROLE_CLASS[role.role] || "role-other" : "role-none", special ? "special" : ""].join(" ").trim();
      const where = !role || role.role === "template" ? gettext("added by the template on its own, outside any message you typed")
        : fill(role.cp.message != null ? gettext("%(role)s message %(message)s, characters %(start)s–%(end)s") : gettext("%(role)s, characters %(start)s–%(end)s"),
          { role: role.role, message: role.cp.message + 1, start: role.cp.start, end: role.cp.end });
      const title = special
        ? fill(gettext("special token %(token)s (id %(id)s), bytes %(start)s–%(end)s; %(where)s"),
          { token: special.token.text, id: special.token.id, start: special.token.bytes[0], end: special.token.bytes[1], where })
        : where;
      const span = el("span", { class: cls, title });
      appendVisible(span, text.slice(a, b));
      out.append(span);
    }

    const legend = el("p", { class: "he-legend" });
    const seen = [...new Set(spans.map((s) => s.role))].filter((r) => r !== "template");  // its swatch is the last one
    for (const r of seen) legend.append(el("span", { class: `swatch ${ROLE_CLASS[r] || "role-other"}` }, r));
    if (specials.length) legend.append(el("span", { class: "swatch special" }, gettext("special token")));
    legend.append(el("span", { class: "swatch role-none" }, gettext("added by the template")));

    const messages = typedMessages(spans);
    // Only typed messages' turns count as inside: the template's own text and the generation prompt are outside.
    const insideChars = typedSpans(spans).reduce((n, s) => n + (s.end - s.start), 0);
    this.dataset.messages = String(messages);
    this.dataset.addedChars = String(maps.chars - insideChars);
    const names = [...new Set(specials.map((s) => showPiece(s.token.text)))];
    const head = el("p", { class: "he-head" });
    head.append(gettext("Template source: "), el("code", {}, source));

    const scroll = el("div", { class: "he-scroll", tabindex: "0", role: "region", "aria-label": gettext("the templated prompt (scrollable)") });
    scroll.append(out);
    const marked = specials.reduce((n, s) => n + (s.end - s.start), 0);
    // A message's turn includes its role markers; everything else (a default system prompt, the generation prompt) is the template's own.
    this.root.replaceChildren(head, legend, scroll, caption(
      fill(gettext("Measured on this run: the %(messages)s you typed became one string of %(chars)s; "
        + "%(outside)s of them lie outside your messages' turns, added by the template."),
      { messages: count(messages, ngettext("%(n)s message", "%(n)s messages", messages)), chars: characters(maps.chars), outside: maps.chars - insideChars })
      + " " + (specials.length ? fill(gettext("The template added %(tokens)s (%(names)s, %(chars)s) that mark roles and turn ends; you typed none of them."),
        { tokens: count(specials.length, ngettext("%(n)s special token", "%(n)s special tokens", specials.length)), names: names.join(", "), chars: characters(marked) })
        : gettext("No special tokens in this prompt.")),
    ));
  }
}

/** Text with newlines shown as ↵ followed by the real line break (the break stays a break). */
function appendVisible(node, text) {
  const parts = text.split("\n");
  parts.forEach((part, i) => {
    if (part) node.append(part);
    if (i < parts.length - 1) {
      node.append(el("span", { class: "nl", "aria-hidden": "true" }, "\u21b5"));
      node.append("\n");
    }
  });
}

define("he-template", HeTemplate);
