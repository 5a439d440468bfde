// The run controls: Play (the form's submit), Pause, Resume, Step, Stop and Escape, each enabled exactly
// when the server accepts its message in the run's state.
import { addMessage, bindRunKeys, readMessages, readParams } from "../prompt-form.js";
import { $, LIVE, changed, client, page, pair, runPhase, state, workshop } from "./page.js";
import { guess, guessing } from "./guess.js";
import { gettext } from "../lib/i18n.js";
import { changesNothing, readCompare } from "./compare.js";

/** Stop, naming the last step drawn: the server keeps at most the one it is computing. */
export function stopRun() {
  if (!LIVE.has(runPhase()) || workshop.following) return;
  page.stopping = true;
  client.send({ type: "stop", step: pair.active ? pair.count : state.steps.length }); // compare mode: the longer run's
  changed();
}

export function start(paused = false) {
  page.banner = null;
  const messages = readMessages();
  if (!messages.length) { page.banner = { kind: "error", text: "Add at least one message first." }; changed(); return; }
  const msg = { type: "start", messages, params: readParams() };
  if (paused) msg.paused = true;
  const compare = readCompare(); // run B beside it (issue 29)
  if (compare && changesNothing(compare)) {
    page.banner = { kind: "error", at: Date.now(), text: gettext("Run B changes nothing yet: set its temperature, top-p, seed, weights or model, or press Stop comparing.") };
    changed();
    return;
  }
  if (compare) msg.compare = compare;
  page.comparePending = Boolean(compare);
  page.lastStart = { messages: msg.messages, params: msg.params };
  page.starting = true;
  client.send(msg);
  changed();
  showProgress();
}

/** On a narrow screen the run bar sits screens below the prompt box: bring the status and the reply into view. */
function showProgress() {
  const bar = document.querySelector(".run-bar");
  const box = bar?.getBoundingClientRect();
  if (box && (box.top > innerHeight - box.height || box.bottom < 0)) bar.scrollIntoView({ block: "start" });
}

export function bindButtons() {
  // #btn-play is the form's submit button: clicks and Enter in a parameter box both arrive as "submit".
  $("#btn-pause").addEventListener("click", () => client.send({ type: "pause" }));
  $("#btn-resume").addEventListener("click", () => client.send({ type: "resume" }));
  $("#btn-stop").addEventListener("click", stopRun);
  $("#btn-step").addEventListener("click", () => {
    if (runPhase() === "paused") { page.stepAsked = true; client.send({ type: "step" }); changed(); }
    else start(true); // from idle: start paused on the prefill, then step by step
  });
  $("#add-message").addEventListener("click", () => addMessage("user", "", changed).querySelector("textarea").focus());
  // In guess mode a run starts paused: each step comes when the learner has guessed it (article/guess.js).
  $("#run-form").addEventListener("submit", (e) => { e.preventDefault(); if (!$("#btn-play").disabled) start(guess.on); });
  bindRunKeys($("#run-form"), () => $("#run-form").requestSubmit());
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && LIVE.has(runPhase())) { e.preventDefault(); stopRun(); }
  });
}

/** Each button is enabled exactly when the server accepts its message in the run's state. */
export function renderButtons() {
  const phase = runPhase();
  const online = page.connection.state === "open";
  const driven = online && !workshop.following; // the host drives a followed run
  $("#btn-play").disabled = !online || !document.querySelector("#messages .message");
  const restarts = LIVE.has(phase) || phase === "stopping" || phase === "finishing";
  $("#btn-play").textContent = restarts ? gettext("Restart") : gettext("Play");
  $("#btn-pause").disabled = !driven || (phase !== "prefilling" && phase !== "running" && phase !== "held");
  $("#btn-resume").disabled = !driven || phase !== "paused";
  $("#btn-step").disabled = !driven || (phase !== "paused" && phase !== "idle") || page.stepAsked;
  $("#btn-stop").disabled = !driven || !LIVE.has(phase);
  if (!workshop.ownRunsAllowed) $("#btn-play").disabled = true; // the workshop host turned own runs off
  if (guessing()) { // the learner's picks move the run on, one step each
    for (const id of ["#btn-resume", "#btn-step"]) $(id).disabled = true;
  }
  const toggle = $("#guess-mode");
  if (toggle) toggle.disabled = workshop.following || page.compareOn; // guess mode holds one run's steps
}
