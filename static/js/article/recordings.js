// Recorded runs, stepped through with no model: a permalink (/runs/<id>) or a shipped example; and the
// page's one step bar, which follows a live run too.
import { ExamplePicker, Replay, fetchJson } from "../replay.js";
import { StepBar } from "../step-bar.js";
import { fillPromptForm } from "../prompt-form.js";
import { $, LIVE, changed, client, page, pair, runPhase, state, workshop } from "./page.js";
import { start, stopRun } from "./controls.js";
import { feedDiagrams } from "./diagrams.js";
import { fill, gettext, grouped, ngettext } from "../lib/i18n.js";
import { recordingShown, recordingWhole } from "./guess.js";
import { fillCompare } from "./compare.js";
import { showPairOf } from "./compare.js";

/** The step bar, made once; scrubbing is a change to the chrome (the diagrams follow the page step themselves). */
function ensureStepBar() {
  page.stepBar ??= new StepBar($("#replay-bar"), () => (pair.active ? pair.count : state.steps.length), changed);
  return page.stepBar;
}

/**
 * Where a run rests: the link's #step=, else, for a recording opening, its first generated token (not the end,
 * often eos), and for a live run ending, its last step: the one the learner was watching (issue 23).
 */
function restingStep(ended = false) {
  const n = state.steps.length;
  return page.wantedStep != null ? Math.min(page.wantedStep, n) : ended ? n : Math.min(1, n);
}

/** Draw a whole recording; the step bar then picks the step every diagram shows. */
function showRecording(recording, kind) {
  page.mode = kind;
  page.original = null;
  page.recording = recording;
  const replay = new Replay(recording.payloads);
  replay.stateAt(replay.steps, state);
  showPairOf(replay); // a saved compare run: its run B and the comparisons; else none
  const bar = ensureStepBar();
  bar.reset();
  bar.place(restingStep());
  bar.show();
  feedDiagrams();
  changed();
  recordingShown(recording); // guess mode: back to the step shown, the next one to guess
}

/** The whole example in place of its first-paint file: the same run, the step the visitor is on kept. */
function showWhole(recording) {
  page.recording = recording;
  if (recordingWhole(recording)) return true;
  const replay = new Replay(recording.payloads);
  replay.stateAt(replay.steps, state);
  showPairOf(replay);
  feedDiagrams();
  changed();
  return true;
}

/** A live run took over the diagrams: the step bar follows it, the examples stay to pick from. */
export function goLive() {
  page.mode = "live";
  page.hostStep = workshop.following ? workshop.look?.step ?? null : null; // a late joiner: the host's step so far
  workshop.offerJump(null);
  page.original = null;
  page.forkAsked = null;
  const bar = ensureStepBar();
  bar.reset();
  bar.show();
  page.examples?.live(workshop.following);
}

/** The host moved the broadcast on (Step while paused, or Resume): the room follows its newest step again. */
function hostMovedOn(msg) {
  const was = page.lastRunState;
  if (msg.type === "status") page.lastRunState = msg.run_state;
  return (msg.type === "step" && was === "paused") || (msg.type === "status" && msg.run_state === "running" && was === "paused");
}

/** Keep the step bar with the run: follow while it streams, stay on its last step when it finishes (or on the
 * step the workshop host asked everyone to look at, until the host moves the run on). */
export function followRun(msg) {
  const { stepBar, forkAsked } = page;
  if (!stepBar || page.mode !== "live") return;
  if (hostMovedOn(msg) && page.hostStep != null) {
    page.hostStep = null;
    workshop.offerJump(null);
  }
  const hostStep = workshop.following ? page.hostStep : null;
  if (msg.type === "done" && !stepBar.moved) stepBar.place(hostStep ?? restingStep(true));
  else if (msg.type === "step" && forkAsked && msg.forced && !pair.active) { // compare mode: article/compare.js ends the fork
    stepBar.seek(msg.step);
    page.banner = null;
    if (forkAsked.continue) client.send({ type: "resume" });
    page.forkAsked = null;
  } else if ((msg.type === "step" || msg.type === "prefill") && hostStep != null && !stepBar.moved) stepBar.place(hostStep);
  else if (msg.type === "step" || msg.type === "prefill") stepBar.follow();
  else stepBar.render();
}

/** The host said "everyone look at step N": the step bar goes there, unless the visitor has moved it themselves
 * (then the banner offers a button to jump there). */
export function lookAtHostStep(step) {
  page.hostStep = step;
  const bar = page.stepBar;
  if (!bar || page.mode !== "live") return;
  if (bar.moved) workshop.offerJump(step);
  else bar.place(step);
  changed();
}

/** "Jump to the host's step": back on the host's step, following the host's choices again. */
export function jumpToHostStep() {
  const bar = page.stepBar;
  workshop.offerJump(null);
  if (!bar || page.hostStep == null) return;
  bar.moved = false;
  bar.place(page.hostStep);
  changed();
}

function loadFailed(err) {
  page.banner = { kind: "error", at: Date.now(), text: fill(gettext("The recording could not be loaded: %(reason)s"), { reason: err.message }) };
}

export async function replayRecording(id) {
  try {
    const body = await fetchJson(`/api/runs/${encodeURIComponent(id)}`);
    showRecording(body, "recording");
    fillForm(body.messages || [], { ...(body.params || {}), seed: body.seed ?? body.params?.seed });
    fillCompare(body.payloads); // a saved pair runs as a pair again
    const live = $("#run-live");
    if (live) { live.href = `/?run=${encodeURIComponent(id)}`; live.hidden = false; }
    const n = state.steps.length;
    const text = ngettext("A recorded run (%(model)s, %(n)s step): no model is running. \"Run this live\" runs it on the server.",
      "A recorded run (%(model)s, %(n)s steps): no model is running. \"Run this live\" runs it on the server.", n);
    page.banner = { kind: "info", text: fill(text, { model: body.model_spec, n: grouped(n) }) };
  } catch (err) {
    loadFailed(err);
  }
  feedDiagrams();
  changed();
}

function fillForm(messages, params) {
  fillPromptForm(messages, params, changed);
  changed();
}

/** "Run this live" (/?run=<id>): the recording's prompt and parameters in the form, run once connected. */
export async function runRecordingLive(id) {
  try {
    const body = await fetchJson(`/api/runs/${encodeURIComponent(id)}`);
    fillForm(body.messages || [], { ...(body.params || {}), seed: body.seed ?? body.params?.seed });
    fillCompare(body.payloads); // a saved pair runs as a pair again
  } catch (err) {
    loadFailed(err);
    changed();
    return;
  }
  const go = () => { if (page.connection.state === "open" && !$("#btn-play").disabled) { start(false); return true; } return false; };
  if (go()) return;
  const onState = () => { if (go()) client.removeEventListener("state", onState); };
  client.addEventListener("state", onState);
}

/** The first paint: the first shipped example, drawn before (and without) any socket message. */
export function loadExamples(indexUrl) {
  page.examples = new ExamplePicker($("#example-bar"), indexUrl, (recording, byVisitor, whole) => {
    if (whole) return page.mode === "example" && !page.starting && showWhole(recording); // not under a run's start
    // The visitor's own run came first, or is on its way (in the start line, or prefilling): its status stays.
    const ownRun = page.mode === "live" || page.starting;
    if (ownRun && !byVisitor) return false;
    if (ownRun && LIVE.has(runPhase())) stopRun(); // the visitor picked a recording over the run going on
    showRecording(recording, "example");
    if (byVisitor) fillForm(recording.messages, recording.params);
    return true;
  });
  page.examples.load().catch((err) => {
    $("#example-bar").hidden = true; // drawn from the start ("Loading the recorded examples…"): none to pick from
    console.warn("the example runs did not load", err);
  });
}
