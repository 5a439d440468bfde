// The page's chrome around the diagrams: the status banner (what the run and the socket are doing), the
// streamed reply and the run buttons, drawn whole from the page's state by renderChrome() on every change.
import { $, page, runPhase, state } from "./page.js";
import { renderButtons } from "./controls.js";
import { guess, guessing } from "./guess.js";
import { prefillText } from "../run-view.js";
import { plural } from "../lib/plural.js";
import { fill, gettext } from "../lib/i18n.js";

function connectionText() {
  const { connection } = page;
  if (connection.state === "connecting") return { kind: "info", text: gettext("Connecting to the server…") };
  if (connection.state === "closed") {
    const left = connection.retryAt != null ? Math.max(0, Math.ceil((connection.retryAt - Date.now()) / 1000)) : null;
    return { kind: "error", text: left != null ? fill(gettext("Not connected to the server; reconnecting in %(seconds)s s."), { seconds: left })
      : gettext("Not connected to the server.") };
  }
  return null;
}

function bannerText() {
  const { banner } = page;
  if (banner?.kind === "busy") {
    const left = Math.max(0, Math.ceil((banner.until - Date.now()) / 1000));
    return { kind: "busy", text: left > 0 ? `Server busy: ${banner.reason}, retry in ${left} s` : `Server busy: ${banner.reason}. Press play to retry.` };
  }
  if (banner) return banner;
  const offline = connectionText();
  if (offline) return offline;
  const st = state.status?.state;
  const n = state.steps.length;
  if (st === "loading") return { kind: "info", text: state.status.message || "Loading the model…" }; // the server's words
  const phase = runPhase();
  if (phase === "queued") return { kind: "info", text: state.status.message }; // "You are 3rd in line; about 10 s", as it moves
  if (phase === "prefilling") return { kind: "info", text: prefillText(state.status) }; // from Enter on, over an example too
  if (phase === "stopping") return { kind: "info", text: stoppingText(n) };
  if (page.mode === "example") return { kind: "info", text: gettext("Showing a recorded example. Press play to run the model on your prompt.") };
  if (phase === "held") return { kind: "info", text: `Waiting for this page to catch up (ack) after step ${n}.` };
  if (phase === "running") return { kind: "info", text: n && state.prefill ? `Generating… step ${n}` : firstTokenText() };
  if (phase === "paused" && guessing() && !state.done) {
    return { kind: "info", text: guess.question ? fill(gettext("Step %(step)s is computed: pick your guess below to see it."), { step: n + 1 })
      : fill(gettext("Paused after step %(step)s: press Next token for the next guess."), { step: n }) };
  }
  if (phase === "paused") return { kind: "info", text: n ? fill(gettext("Paused after step %(step)s."), { step: n }) : gettext("Paused after the prefill. Press step.") };
  if (state.done) {
    const t = state.done.timing || {};
    const rate = t.tokens_per_s != null ? `, ${t.tokens_per_s.toFixed(1)} tokens/s` : "";
    return { kind: "ok", text: `Finished (${state.done.stop_reason}) after ${plural(state.done.steps, "step")}${rate}.` };
  }
  if (st === "finished" && state.prefill) return { kind: "ok", text: `Finished after ${plural(n, "step")}.` };
  if (state.prefill) return { kind: "info", text: n ? `Generating… step ${n}` : firstTokenText() };
  if (state.status?.message) return { kind: "info", text: state.status.message };
  return { kind: "info", text: gettext("Ready. Press play to run the model on your prompt.") };
}

function stoppingText(n) {
  if (n) return `Stopping after step ${n}…`;
  return state.status?.state === "queued" ? "Leaving the line…" : "Stopping the prefill after the chunk it is reading…";
}

/** Between the prefill's payload and step 1: the causal-mask check runs, then the first token is drawn. */
function firstTokenText() {
  const tokens = state.prefill?.tokens?.length;
  return tokens ? `Prefill done (${plural(tokens, "token")}); the first token comes next…` : "Reading your prompt (prefill)…";
}

/** Draw everything around the diagrams from the state as it is now (main.js runs it on every change). */
export function renderChrome() {
  const b = bannerText();
  const node = $("#status-banner");
  node.textContent = b.text;
  node.dataset.kind = b.kind;
  const reply = $("#reply");
  reply.textContent = state.done ? state.done.text : state.text;
  reply.classList.toggle("streaming", runPhase() === "running" && !state.done);
  reply.classList.toggle("empty", !reply.textContent);
  renderSeed(state.session?.params?.seed);
  const back = $("#btn-original");
  if (back) back.hidden = !page.original;
  renderButtons();
}

/** The seed this run drew on (a fresh one when the seed box was blank), so the visitor can type it back in. */
function renderSeed(seed) {
  const known = Number.isInteger(seed);
  const out = $("#run-seed");
  if (out) out.textContent = known ? `this run: seed ${seed}` : "";
  const line = $("#reply-seed");
  if (line) {
    line.hidden = !known;
    line.textContent = known ? `seed ${seed}: type it in the seed box to draw this reply again` : "";
  }
}
