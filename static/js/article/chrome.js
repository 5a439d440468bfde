// The page's chrome around the diagrams: the status banner (what the run and the socket are doing), the
// streamed reply and the run buttons, drawn whole from the page's state by renderChrome() on every change.
import { $, page, pair, runPhase, state } from "./page.js";
import { renderButtons } from "./controls.js";
import { guess, guessing } from "./guess.js";
import { prefillText } from "../run-view.js";
import { renderCompare } from "./compare.js";
import { decimal, fill, gettext, grouped, language, ngettext } from "../lib/i18n.js";

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
    return { kind: "busy", text: left > 0 ? fill(gettext("Server busy: %(reason)s, retry in %(seconds)s s"), { reason: banner.reason, seconds: left })
      : fill(gettext("Server busy: %(reason)s. Press play to retry."), { reason: banner.reason }) };
  }
  if (banner) return banner;
  const offline = connectionText();
  if (offline) return offline;
  const st = state.status?.state;
  const n = pair.active ? pair.count : state.steps.length; // compare mode: the longer run's steps
  if (st === "loading") return { kind: "info", text: state.status.message || gettext("Loading the model…") }; // the server's words
  const phase = runPhase();
  if (phase === "queued") return { kind: "info", text: queuedText(state.status) }; // "You are 3rd in line; about 10 s", as it moves
  if (phase === "prefilling") return { kind: "info", text: prefillText(state.status) }; // from Enter on, over an example too
  if (phase === "stopping") return { kind: "info", text: stoppingText(n) };
  if (page.mode === "example") return { kind: "info", text: gettext("Showing a recorded example. Press play to run the model on your prompt.") };
  if (phase === "held") return { kind: "info", text: fill(gettext("Waiting for this page to catch up (ack) after step %(step)s."), { step: n }) };
  if (phase === "finishing" && !guessPending()) return { kind: "info", text: finishingText(state.steps.at(-1)) };
  if (phase === "running" || phase === "finishing") return { kind: "info", text: n && state.prefill ? generatingText(n) : firstTokenText() };
  if (phase === "paused" && guessing() && !state.done) {
    return { kind: "info", text: guess.question ? fill(gettext("Step %(step)s is computed: pick your guess below to see it."), { step: n + 1 })
      : fill(gettext("Paused after step %(step)s: press Next token for the next guess."), { step: n }) };
  }
  if (phase === "paused") return { kind: "info", text: n ? fill(gettext("Paused after step %(step)s."), { step: n }) : gettext("Paused after the prefill. Press step.") };
  if (state.done) {
    const t = state.done.timing || {};
    const steps = state.done.steps;
    const text = t.tokens_per_s != null
      ? ngettext("Finished (%(reason)s) after %(n)s step, %(rate)s tokens/s.", "Finished (%(reason)s) after %(n)s steps, %(rate)s tokens/s.", steps)
      : ngettext("Finished (%(reason)s) after %(n)s step.", "Finished (%(reason)s) after %(n)s steps.", steps);
    return { kind: "ok", text: fill(text, { reason: state.done.stop_reason, n: grouped(steps), rate: decimal(t.tokens_per_s, 1) }) };
  }
  if (st === "finished" && state.prefill) return { kind: "ok", text: fill(ngettext("Finished after %(n)s step.", "Finished after %(n)s steps.", n), { n: grouped(n) }) };
  if (state.prefill) return { kind: "info", text: n ? generatingText(n) : firstTokenText() };
  if (state.status?.message) return { kind: "info", text: state.status.message };
  return { kind: "info", text: gettext("Ready. Press play to run the model on your prompt.") };
}

function stoppingText(n) {
  if (n) return fill(gettext("Stopping after step %(step)s…"), { step: n });
  return state.status?.state === "queued" ? gettext("Leaving the line…") : gettext("Stopping the prefill after the chunk it is reading…");
}

/** The place in line the server sent (`position`, `eta_s`), in the page's words; the server's own line without them. */
function queuedText(status) {
  if (!Number.isInteger(status.position)) return status.message;
  const place = ordinal(status.position);
  return status.eta_s != null
    ? fill(gettext("Every generation slot is taken. You are %(place)s in line; about %(seconds)s s. Stop leaves the line."), { place, seconds: status.eta_s })
    : fill(gettext("Every generation slot is taken. You are %(place)s in line. Stop leaves the line."), { place });
}

// An ordinal the way the page's language writes it: 1st, 2nd, 3rd; 1er, 2e; 1.º; 第 1 (the translation says 位).
const SUFFIXES = { en: { one: "st", two: "nd", few: "rd", other: "th" }, fr: { one: "er", other: "e" }, es: { other: ".º" } };
function ordinal(n) {
  const lang = language().toLowerCase().split("-")[0];
  const suffixes = SUFFIXES[lang];
  if (!suffixes) return String(n);
  return `${n}${suffixes[new Intl.PluralRules(lang, { type: "ordinal" }).select(n)] ?? suffixes.other}`;
}

const generatingText = (n) => fill(gettext("Generating… step %(step)s"), { step: n });
/** Guess mode: the last step's token is not revealed yet, so the reply is not complete on the page. */
const guessPending = () => guessing() && guess.result?.outcome.step !== state.steps.at(-1)?.step;
// `done` follows once the run's checks are out (in a class the checks wait for everyone's tokens: seconds).
const finishingText = (last) => fill(ngettext("The reply is complete (%(reason)s) after %(n)s step; the server is finishing the run's checks…",
  "The reply is complete (%(reason)s) after %(n)s steps; the server is finishing the run's checks…", last.step), { reason: last.stop_reason, n: grouped(last.step) });

/** Between the prefill's payload and step 1: the causal-mask check runs, then the first token is drawn. */
function firstTokenText() {
  const tokens = state.prefill?.tokens?.length;
  return tokens ? fill(ngettext("Prefill done (%(n)s token); the first token comes next…", "Prefill done (%(n)s tokens); the first token comes next…", tokens), { n: grouped(tokens) })
    : gettext("Reading your prompt (prefill)…");
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
  renderCompare();
}

/** The seed this run drew on (a fresh one when the seed box was blank), so the visitor can type it back in. */
function renderSeed(seed) {
  const known = Number.isInteger(seed);
  const out = $("#run-seed");
  if (out) out.textContent = known ? fill(gettext("this run: seed %(seed)s"), { seed }) : "";
  const line = $("#reply-seed");
  if (line) {
    line.hidden = !known;
    line.textContent = known ? fill(gettext("seed %(seed)s: type it in the seed box to draw this reply again"), { seed }) : "";
  }
}
