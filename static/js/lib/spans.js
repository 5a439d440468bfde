// The prompt's character spans (prefill.template.spans): which characters came from a message the visitor
// typed, and which the template added on its own (role "template") or as the generation prompt.
import { gettext, ngettext, fill, grouped } from "./i18n.js";
export const MESSAGE_ROLES = new Set(["system", "user", "assistant"]);

/** The spans of typed messages (a message can have more than one when the template writes inside its turn). */
export const messageSpans = (spans = []) => spans.filter((s) => MESSAGE_ROLES.has(s.role));

/** Characters the visitor typed, with their turns' role markers: messages' spans, or a raw text prompt. */
export const typedSpans = (spans = []) => spans.filter((s) => MESSAGE_ROLES.has(s.role) || s.role === "text");

/** How many messages the visitor typed. Recordings made before spans carried `message` have one span each. */
export function typedMessages(spans = []) {
  return new Set(messageSpans(spans).map((s, i) => s.message ?? `span ${i}`)).size;
}

/** The map's figure for the prompt: "1 message", or what a prompt without messages was. */
export function promptFigure(spans = []) {
  const n = typedMessages(spans);
  if (n) return fill(ngettext("%(n)s message", "%(n)s messages", n), { n: grouped(n) });
  return spans[0]?.role === "text" ? gettext("raw text") : gettext("token ids");
}
