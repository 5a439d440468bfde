// Guess mode (issue 26): "Guess each token". Before each step is shown, the learner picks which token comes next
// from the model's top 8 and 2 lower ones (shuffled); then the step is drawn with their pick marked beside the
// model's odds, and a running score. On a live run the page starts paused and asks for one step at a time,
// holding each (and what follows it) until the pick; on a recording (an example, a permalink) it folds one more
// step at each pick. The diagrams, the reply and the step bar never get ahead of what has been revealed.
import { $, changed, client, page, replaying, state, workshop } from "./page.js";
import { candidatesOf, outcomeOf, quizTable, tokenLabel } from "../lib/quiz-chart.js";
import { el } from "../lib/base-element.js";
import { pct } from "../lib/widgets.js";
import { Replay } from "../replay.js";
import { fill, gettext } from "../lib/i18n.js";

export const guess = {
  on: false,
  held: [],        // a live run's messages from the asked step on, not yet shown
  question: null,  // {step, candidates}: what the learner is asked now
  result: null,    // {outcome, picked}: the last reveal
  score: { asked: 0, drawn: 0, top: 0 },
  replay: null,    // a recording in guess mode: its Replay and how many steps are revealed
  deliver: () => {}, // main.js: a released message goes through the page as if it had just arrived
  feed: () => {},    // main.js: the diagrams and the chrome redraw from the state
};

/** Whether a live message waits for the learner's pick (the step asked about, and everything after it). */
export function holds(msg) {
  if (!guess.on || workshop.following || page.mode !== "live" && msg.type !== "session") return false;
  if (msg.type === "session") { guess.replay = null; reset(); return false; } // a live run: a new score
  if (msg.type === "status" && msg.run_state === "paused" && !guess.held.length && !guess.question && !state.done
      && state.prefill && state.steps.length === 0 && !page.stepAsked) {
    queueMicrotask(askNext); // paused after the prefill: the first question comes at once
  }
  if (msg.type !== "step" && !guess.held.length) return false;
  guess.held.push(msg);
  if (msg.type === "step" && !guess.question) ask(msg);
  return true;
}

function reset() {
  Object.assign(guess, { held: [], question: null, result: null, score: { asked: 0, drawn: 0, top: 0 } });
  render();
}

/** Show the question for `step`; `focus` only when the learner's own action led here (a redrawn example must not
 * take the focus from what they are doing, say from Play). */
function ask(step, focus = true) {
  const eos = new Set((state.session?.eos || []).map((t) => t.id));
  guess.question = { step, candidates: candidatesOf(step, eos) };
  guess.result = null;
  render();
  if (focus) $("#guess-card input[type=radio]")?.focus({ preventScroll: true });
}

/** The learner picked: score it, then show the step (and what followed it) to the page. */
function reveal(key) {
  const { step, candidates } = guess.question;
  const picked = candidates.find((c) => c.key === key);
  const outcome = { ...outcomeOf(step, candidates, key), source: step };
  guess.score.asked += 1;
  if (picked.id === step.token.id) guess.score.drawn += 1;
  if (picked.id === step.logits.top[0].id) guess.score.top += 1;
  guess.result = { outcome, picked };
  guess.question = null;
  if (guess.replay) showRevealed(guess.replay.at + 1);
  else release();
  render();
  $("#guess-next")?.focus({ preventScroll: true });
}

/** Show what is held up to the next step not yet guessed (a step already on its way when guessing began). */
function release() {
  while (guess.held.length) {
    const msg = guess.held.shift();
    if (msg.type === "step" && guess.result && msg !== guess.result.outcome.source) {
      guess.held.unshift(msg);
      queueMicrotask(() => ask(msg));
      return;
    }
    guess.deliver(msg);
  }
}

/** The next question: a live run's next step from the server, or the recording's next step. */
function askNext(focus = true) {
  if (guess.replay) {
    const { replay, at } = guess.replay;
    if (at < replay.steps) ask(replay.payloads[replay.stepIndexes[at]], focus);
    return;
  }
  if (state.done || guess.question || guess.held.length) return;
  page.stepAsked = true;
  client.send({ type: "step" });
  changed();
}

/** A recording in guess mode shows its first `n` steps only (then, with guess mode off, all of them). */
function showRevealed(n) {
  const { replay } = guess.replay;
  guess.replay.at = replay.clamp(n);
  replay.stateAt(guess.replay.at, state);
  page.stepBar?.place(guess.replay.at);
  guess.feed();
}

/** Turn guess mode on or off (the toggle beside Play). */
export function setGuessing(on, recording = null, focus = true) {
  guess.on = on;
  reset();
  if (on && replaying() && recording) {
    guess.replay = { replay: new Replay(recording.payloads), at: 0 };
    showRevealed(Math.min(page.stepBar?.position ?? 0, guess.replay.replay.steps));
    askNext(focus);
  } else if (!on && guess.replay) {
    showRevealed(guess.replay.replay.steps);
    guess.replay = null;
  } else if (!on) {
    for (const msg of guess.held.splice(0)) guess.deliver(msg);
  } else if (page.mode === "live" && !workshop.following && state.status?.run_state === "paused") askNext();
  else if (page.mode === "live" && !workshop.following && state.status?.run_state === "running") client.send({ type: "pause" });
  render();
  changed();
}

/** A recording was drawn (an example picked, a permalink opened): guessing starts again on it. */
export function recordingShown(recording) {
  if (guess.on) { guess.replay = null; setGuessing(true, recording, false); } // drawn by itself: the focus stays
}

/** An example's whole file replaced its first paint: in guess mode the page stays on the steps revealed. */
export function recordingWhole(recording) {
  if (!guess.replay) return false;
  guess.replay.replay = new Replay(recording.payloads);
  showRevealed(guess.replay.at);
  return true;
}

/** Whether the run buttons must wait: a question is open, or the run goes on only one guess at a time. */
export function guessing() {
  return guess.on && page.mode === "live";
}

// ---- the card ------------------------------------------------------------------------------------

let drawn = null; // the question or result on the card: redrawn only when it changes (a redraw loses the focus)

function render() {
  const card = $("#guess-card");
  if (!card) return;
  card.hidden = !guess.on || (!guess.question && !guess.result);
  const now = card.hidden ? null : guess.question ?? guess.result;
  if (now === drawn) return;
  drawn = now;
  card.replaceChildren(...(guess.question ? questionView() : guess.result ? resultView() : []));
}

function questionView() {
  const { step, candidates } = guess.question;
  const form = el("form", { class: "quiz-form" });
  const choices = form.appendChild(el("fieldset", { class: "quiz-choices" }));
  choices.append(el("legend", {}, fill(gettext("Step %(step)s: which token does the model write next?"), { step: step.step })));
  for (const c of candidates) {
    const label = choices.appendChild(el("label", { class: "quiz-choice" }));
    label.append(el("input", { type: "radio", name: "guess", value: String(c.key) }), el("span", { class: "quiz-token" }, tokenLabel(c)));
  }
  const line = el("p", { class: "quiz-status", role: "status" }, gettext("The model has computed this step; the page shows it once you pick."));
  form.append(el("button", { type: "submit", class: "primary" }, gettext("Reveal")), line);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const picked = [...form.elements.guess].find((r) => r.checked);
    if (picked) reveal(Number(picked.value));
    else { line.textContent = gettext("Pick a token first (arrow keys move between them)."); line.dataset.kind = "error"; }
  });
  return [el("h2", { id: "guess-title" }, gettext("Guess the next token")), el("p", { class: "quiz-context" }, contextLine()), form, scoreLine()];
}

function contextLine() {
  return state.text ? `${gettext("The reply so far:")} ${state.text}▮` : gettext("The reply has not begun: this is its first token.");
}

function resultView() {
  const { outcome, picked } = guess.result;
  const top = outcome.candidates.reduce((a, b) => ((b.model_prob ?? -1) > (a.model_prob ?? -1) ? b : a));
  const drawn = outcome.candidates.find((c) => c.id === outcome.token.id);
  const yours = outcome.candidates.find((c) => c.key === picked.key).model_prob;
  const words = [fill(gettext("You picked %(token)s; the model gave it %(p)s."), { token: tokenLabel(picked), p: pct(yours) }),
    picked.id === top.id ? gettext("That is the model's top token.")
      : fill(gettext("The model's top token was %(token)s at %(p)s."), { token: tokenLabel(top), p: pct(top.model_prob) }),
    outcome.greedy ? fill(gettext("At temperature 0 the model takes its top token: %(token)s."), { token: tokenLabel(drawn) })
      : fill(picked.id === drawn.id ? gettext("The dice (u = %(u)s) drew %(token)s: your pick.") : gettext("The dice (u = %(u)s) drew %(token)s."),
        { u: outcome.u.toFixed(3), token: tokenLabel(drawn) })];
  const box = el("div", { class: "quiz-words", role: "status" });
  for (const w of words) box.append(el("p", {}, w));
  const next = el("button", { type: "button", id: "guess-next", class: "primary" }, gettext("Next token"));
  // The step that ends the reply says so (stop_reason); `done` may come seconds later, after the run's checks
  next.disabled = Boolean(state.done) || Boolean(outcome.source?.stop_reason) || (guess.replay && guess.replay.at >= guess.replay.replay.steps);
  if (next.disabled) next.textContent = gettext("The reply has ended");
  next.addEventListener("click", askNext);
  return [el("h2", { id: "guess-title" }, fill(gettext("Step %(step)s: the model's answer"), { step: outcome.step })), box, scoreLine(),
    quizTable({ outcome, candidates: outcome.candidates }, { key: picked.key, token: picked }, "you"), next];
}

function scoreLine() {
  const { asked, drawn, top } = guess.score;
  return el("p", { class: "guess-score" }, asked ? fill(gettext("You matched the model's pick %(drawn)s of %(asked)s times; you gave its top token %(top)s of %(asked)s."),
    { drawn, asked, top }) : gettext("Your score appears after your first pick."));
}
