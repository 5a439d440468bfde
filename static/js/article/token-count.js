// The prompt's length as the model will read it, while the visitor types: a debounced `tokenize` over the socket
// (answered by the server's tokenizer alone, docs/protocol.md), shown under the messages against the server's cap.
import { readMessages } from "../prompt-form.js";
import { $, client } from "./page.js";
import { fill, gettext, grouped, ngettext } from "../lib/i18n.js";

const WAIT_MS = 250; // after the last keystroke
const WARN_AT = 0.9; // of the server's cap: the line turns to a warning
let timer = null;
let asked = 0; // the seq of the next or latest `tokenize`: an answer with another seq counts an older text

/** Ask again once typing pauses (or at once, when the socket has just opened). */
export function countSoon(now = false) {
  clearTimeout(timer);
  asked += 1; // from this edit on, an answer still in flight counts a text that is no longer in the box
  $("#token-count")?.setAttribute("aria-busy", "true"); // the line is for an older text until the answer comes
  timer = setTimeout(askCount, now ? 0 : WAIT_MS);
}

function askCount() {
  const messages = readMessages();
  if (client.state !== "open" || !messages.length) { showCount(null); $("#token-count").setAttribute("aria-busy", "false"); return; }
  client.send({ type: "tokenize", messages, seq: asked });
}

/** The server's `tokenized` answer (or its refusal of the count: an error naming `messages`). */
export function onCount(msg) {
  if (msg.seq !== asked) return;
  showCount(msg);
  $("#token-count").setAttribute("aria-busy", "false");
}

/** "1 token", "384 tokens" (or "prompt tokens"); "– tokens" when the server did not say. */
const tokens = (n) => fill(ngettext("%(n)s token", "%(n)s tokens", n ?? 0), { n: n == null ? "–" : grouped(n) });
const promptTokens = (n) => fill(ngettext("%(n)s prompt token", "%(n)s prompt tokens", n ?? 0), { n: n == null ? "–" : grouped(n) });

/** The prompt's count, with the tokens the template added when it added any. */
function counted(msg) {
  if (!msg.template_tokens) return tokens(msg.tokens);
  return fill(gettext("%(tokens)s (%(added)s added by the template)"), { tokens: tokens(msg.tokens), added: grouped(msg.template_tokens) });
}

function showCount(msg) {
  const line = $("#token-count");
  if (!line) return;
  if (!msg) { line.textContent = ""; line.dataset.kind = ""; return; }
  if (msg.error) { line.dataset.kind = "error"; line.textContent = fill(gettext("The prompt cannot be counted: %(reason)s"), { reason: msg.error.message }); return; }
  if (msg.tokens > msg.limit) {
    line.dataset.kind = "error";
    line.textContent = `${fill(gettext("%(tokens)s: past this server's cap of %(cap)s by %(over)s."), { tokens: counted(msg), cap: promptTokens(msg.limit), over: grouped(msg.tokens - msg.limit) })} `
      + fill(gettext("Shorten the messages. The cap is the server's, to keep every visitor's wait short; the model's own context window is %(window)s."), { window: tokens(msg.context_window) });
    return;
  }
  line.dataset.kind = msg.tokens >= WARN_AT * msg.limit ? "warn" : "ok";
  const values = { tokens: counted(msg), cap: grouped(msg.limit), left: grouped(msg.limit - msg.tokens) };
  line.textContent = line.dataset.kind === "warn" ? fill(gettext("%(tokens)s of the server's %(cap)s: %(left)s left before the cap"), values)
    : fill(gettext("%(tokens)s of the server's %(cap)s"), values);
}

/** Count on every edit of the messages (text, role, a message added or removed) and whenever the socket opens. */
export function bindTokenCount() {
  const list = $("#messages");
  if (!list || !$("#token-count")) return;
  list.addEventListener("input", () => countSoon());
  list.addEventListener("change", () => countSoon());
  new MutationObserver(() => countSoon()).observe(list, { childList: true });
  client.addEventListener("state", (e) => { if (e.detail.state === "open") countSoon(true); });
}
