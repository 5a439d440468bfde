// The prompt's length as the model will read it, while the visitor types: a debounced `tokenize` over the socket
// (answered by the server's tokenizer alone, docs/protocol.md), shown under the messages against the server's cap.
import { readMessages } from "../prompt-form.js";
import { $, client } from "./page.js";
import { plural } from "../lib/plural.js";

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

function showCount(msg) {
  const line = $("#token-count");
  if (!line) return;
  if (!msg) { line.textContent = ""; line.dataset.kind = ""; return; }
  if (msg.error) { line.dataset.kind = "error"; line.textContent = `The prompt cannot be counted: ${msg.error.message}`; return; }
  const n = (x) => x.toLocaleString("en");
  const added = msg.template_tokens ? ` (${n(msg.template_tokens)} added by the template)` : "";
  if (msg.tokens > msg.limit) {
    line.dataset.kind = "error";
    line.textContent = `${plural(msg.tokens, "token")}${added}: past this server's cap of ${plural(msg.limit, "prompt token")} by ${n(msg.tokens - msg.limit)}. `
      + `Shorten the messages. The cap is the server's, to keep every visitor's wait short; the model's own context window is ${plural(msg.context_window, "token")}.`;
    return;
  }
  line.dataset.kind = msg.tokens >= WARN_AT * msg.limit ? "warn" : "ok";
  const near = line.dataset.kind === "warn" ? `: ${n(msg.limit - msg.tokens)} left before the cap` : "";
  line.textContent = `${plural(msg.tokens, "token")}${added} of the server's ${n(msg.limit)}${near}`;
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
