// Wires the article: prompt box, parameters, run buttons, status banner, streamed reply, and
// hands one RunState (folded from every server message) to every diagram on the page.
import { RunState } from "./run-state.js";
import { SessionClient } from "./client.js";
import { RunRecorder } from "./save-run.js";
import { WorkshopFollow } from "./workshop-follow.js";
import { ExamplePicker, Replay, fetchJson } from "./replay.js";
import { StepBar, stepFromUrl } from "./step-bar.js";
import { fillRunWords } from "./run-words.js";
import { addMessage, bindRanges, bindRunKeys, fillPromptForm, readMessages, readParams } from "./prompt-form.js";
import { SECTIONS } from "./embed-driver.js";
import { addExportBar } from "./export-bar.js";

const ELEMENTS = [...SECTIONS.map((section) => `he-${section}`), "he-pipeline"];
const DEFAULT_MESSAGES = [{ role: "user", content: "The mole on my face may need a biopsy. Explain this simply." }];

const $ = (sel) => document.querySelector(sel);
const state = new RunState();
const client = new SessionClient();
const workshop = new WorkshopFollow(client); // listens first: following is current when the page redraws
let recorder = null;      // keeps the current run's payloads for "Save run"
let lastStart = null;     // the messages and params of the last start sent
let diagrams = [];
let banner = null;        // {kind, text, until?} from the last message that deserves one
let connection = { state: "closed", retryAt: null };
let mode = "none";        // what the diagrams show: "example" or "recording" (stepped with the replay bar), or "live"
let stepBar = null;       // the page's one step scrubber (step-bar.js), for live runs and recordings alike
let wantedStep = stepFromUrl(); // #step=12 in the link: where a finished run or a recording opens
let original = null;      // the run as it was before the first fork: {steps, done}; "back to the original" shows it
let forkAsked = null;     // {step, token_id} of a fork sent and not yet answered
let examples = null;      // the shipped examples' picker (the article page only)
let stopping = false;     // Stop was pressed and the run's `done` has not come yet
let stepAsked = false;    // Step was pressed and its step has not come yet

// ---- diagrams -------------------------------------------------------------------------------

function findDiagrams() {
  diagrams = [...document.querySelectorAll(ELEMENTS.join(","))];
}

/** Give the state to every defined diagram (setting a property before the upgrade would shadow it). */
function feedDiagrams(only) {
  if (!only) fillRunWords(state.prefill);
  for (const node of diagrams) {
    if (only && node.localName !== only) continue;
    if (customElements.get(node.localName)) node.data = state;
  }
}

/** What a copied embed code shows: the recording or example on show, or this page's finished run, saved first. */
async function embedSource() {
  if (mode === "recording") return { run: document.querySelector("[data-run-id]").dataset.runId };
  if (mode === "example" && $("#example-bar")?.dataset.example) return { example: $("#example-bar").dataset.example };
  if (mode !== "live" || !recorder) throw new Error("nothing has run yet");
  if (!state.done) throw new Error("the run is still going: copy the embed code once it has finished");
  return { run: (await recorder.savedRun()).id };
}

/** "Download SVG", "Download PNG" and "Copy embed code" under every section's diagram (the sticky pipeline strip is navigation). */
function addExportBars() {
  for (const node of diagrams) if (SECTIONS.includes(node.localName.slice(3))) addExportBar(node, { source: embedSource });
}

function loadElements() {
  for (const name of ELEMENTS) {
    import(`./elements/${name}.js`)
      .then(() => customElements.whenDefined(name))
      .then(() => feedDiagrams(name))
      .catch((err) => console.warn(`diagram ${name} did not load`, err));
  }
}

// ---- run controls ---------------------------------------------------------------------------

/** What the run is doing, as the server last said: idle, loading, running, paused, held, stopping. */
function runPhase() {
  if (mode === "example" || mode === "recording") return "idle"; // a recording mid-way is not a run going on
  if (state.done) return "idle"; // `done` is the run's last word (a fork clears it)
  if (stopping) return "stopping";
  const s = state.status?.run_state || state.status?.state;
  if (s === "running" || s === "paused" || s === "held" || s === "loading") return s;
  if (s === "prefilling") return "loading";
  if (state.prefill && s !== "finished") return "running";
  return "idle";
}

const LIVE = new Set(["running", "paused", "held"]);
const RUN_MESSAGES = new Set(["prefill", "step", "done", "check", "detail", "retemper"]);

/** Stop, naming the last step drawn: the server keeps at most the one it is computing. */
function stopRun() {
  if (!LIVE.has(runPhase()) || workshop.following) return;
  stopping = true;
  client.send({ type: "stop", step: state.steps.length });
  renderChrome();
}

function start(paused = false) {
  banner = null;
  const messages = readMessages();
  if (!messages.length) { banner = { kind: "error", text: "Add at least one message first." }; renderChrome(); return; }
  const msg = { type: "start", messages, params: readParams() };
  if (paused) msg.paused = true;
  lastStart = { messages: msg.messages, params: msg.params };
  client.send(msg);
  renderChrome();
}

function bindButtons() {
  // #btn-play is the form's submit button: clicks and Enter in a parameter box both arrive as "submit".
  $("#btn-pause").addEventListener("click", () => client.send({ type: "pause" }));
  $("#btn-resume").addEventListener("click", () => client.send({ type: "resume" }));
  $("#btn-stop").addEventListener("click", stopRun);
  $("#btn-step").addEventListener("click", () => {
    if (runPhase() === "paused") { stepAsked = true; client.send({ type: "step" }); renderChrome(); }
    else start(true); // from idle: start paused on the prefill, then step by step
  });
  $("#add-message").addEventListener("click", () => addMessage("user", "", updateButtons).querySelector("textarea").focus());
  $("#run-form").addEventListener("submit", (e) => { e.preventDefault(); if (!$("#btn-play").disabled) start(false); });
  bindRunKeys($("#run-form"), () => $("#run-form").requestSubmit());
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && LIVE.has(runPhase())) { e.preventDefault(); stopRun(); }
  });
}

/** Each button is enabled exactly when the server accepts its message in the run's state. */
function updateButtons() {
  const phase = runPhase();
  const online = connection.state === "open";
  const driven = online && !workshop.following; // the host drives a followed run
  $("#btn-play").disabled = !online || !document.querySelector("#messages .message");
  $("#btn-play").textContent = LIVE.has(phase) || phase === "stopping" ? "Restart" : "Play";
  $("#btn-pause").disabled = !driven || (phase !== "running" && phase !== "held");
  $("#btn-resume").disabled = !driven || phase !== "paused";
  $("#btn-step").disabled = !driven || (phase !== "paused" && phase !== "idle") || stepAsked;
  $("#btn-stop").disabled = !driven || !LIVE.has(phase);
  if (!workshop.ownRunsAllowed) $("#btn-play").disabled = true; // the workshop host turned own runs off
}

// ---- banner and reply -----------------------------------------------------------------------

function bannerText() {
  if (banner?.kind === "busy") {
    const left = Math.max(0, Math.ceil((banner.until - Date.now()) / 1000));
    return { kind: "busy", text: left > 0 ? `Server busy: ${banner.reason}, retry in ${left} s` : `Server busy: ${banner.reason}. Press play to retry.` };
  }
  if (banner) return banner;
  if (connection.state === "connecting") return { kind: "info", text: "Connecting to the server…" };
  if (connection.state === "closed") {
    const left = connection.retryAt != null ? Math.max(0, Math.ceil((connection.retryAt - Date.now()) / 1000)) : null;
    const s = left != null ? `; reconnecting in ${left} s` : "";
    return { kind: "error", text: `Not connected to the server${s}.` };
  }
  const st = state.status?.state;
  const n = state.steps.length;
  if (st === "loading") return { kind: "info", text: "Loading the model…" };
  if (mode === "example") return { kind: "info", text: "Showing a recorded example. Press play to run the model on your prompt." };
  const phase = runPhase();
  if (phase === "stopping") return { kind: "info", text: `Stopping after step ${n}…` };
  if (phase === "held") return { kind: "info", text: `Waiting for this page to catch up (ack) after step ${n}.` };
  if (phase === "running") return { kind: "info", text: n && state.prefill ? `Generating… step ${n}` : "Reading the prompt…" };
  if (phase === "paused") return { kind: "info", text: n ? `Paused after step ${n}.` : "Paused after the prefill. Press step." };
  if (state.done) {
    const t = state.done.timing || {};
    const rate = t.tokens_per_s != null ? `, ${t.tokens_per_s.toFixed(1)} tokens/s` : "";
    return { kind: "ok", text: `Finished (${state.done.stop_reason}) after ${state.done.steps} steps${rate}.` };
  }
  if (st === "finished" && state.prefill) return { kind: "ok", text: `Finished after ${n} steps.` };
  if (state.prefill) return { kind: "info", text: n ? `Generating… step ${n}` : "Reading the prompt…" };
  if (state.status?.message) return { kind: "info", text: state.status.message };
  return { kind: "info", text: "Ready. Press play to run the model on your prompt." };
}

function renderChrome() {
  const b = bannerText();
  const node = $("#status-banner");
  node.textContent = b.text;
  node.dataset.kind = b.kind;
  const reply = $("#reply");
  reply.textContent = state.done ? state.done.text : state.text;
  reply.classList.toggle("streaming", runPhase() === "running" && !state.done);
  reply.classList.toggle("empty", !reply.textContent);
  const back = $("#btn-original");
  if (back) back.hidden = !original;
  updateButtons();
}

// ---- server messages ------------------------------------------------------------------------

function onMessage(msg) {
  if (msg.type === "error") {
    banner = { kind: "error", at: Date.now(), text: `Error ${msg.code}: ${msg.message}${msg.field ? ` (${msg.field})` : ""}` };
  } else if (msg.type === "busy") {
    banner = { kind: "busy", reason: msg.reason, until: Date.now() + 1000 * (msg.retry_after_s || 0) };
  } else if (msg.type === "session" || msg.type === "prefill") {
    banner = null;
    if (msg.type === "session") goLive();
  } else if (banner?.kind === "error" && Date.now() - banner.at > 6000) {
    banner = null; // an old refusal should not hide a run that carries on
  }
  if (msg.type === "session" || msg.type === "done" || (msg.type === "error" && stopping)) stopping = false;
  if (msg.type === "step" || msg.type === "error" || msg.type === "busy" || msg.type === "done" || msg.type === "session") stepAsked = false;
  // A recording on show (an example picked during a run) keeps the diagrams until the next live `session`.
  if (mode !== "live" && RUN_MESSAGES.has(msg.type)) { renderChrome(); return; }
  if (msg.type === "error" && forkAsked) forkAsked = null;
  state.apply(msg);
  followRun(msg);
  recorder?.record(msg, workshop.following ? workshop.request : lastStart);
  recorder?.update(Boolean(state.done) && state.status?.state === "finished");  // after the closing checks
  feedDiagrams();
  renderChrome();
}

// ---- recorded runs: a permalink (/runs/<id>) or a shipped example, stepped through with no model --------

/** The step bar, made once; scrubbing redraws the chrome (the diagrams follow the page step themselves). */
function ensureStepBar() {
  stepBar ??= new StepBar($("#replay-bar"), () => state.steps.length, () => renderChrome());
  return stepBar;
}

/** Where a finished run rests: the link's #step=, else the first generated token (not the end, often eos). */
function restingStep() {
  const n = state.steps.length;
  return wantedStep != null ? Math.min(wantedStep, n) : Math.min(1, n);
}

/** Draw a whole recording; the step bar then picks the step every diagram shows. */
function showRecording(recording, kind) {
  mode = kind;
  original = null;
  const replay = new Replay(recording.payloads);
  replay.stateAt(replay.steps, state);
  const bar = ensureStepBar();
  bar.reset();
  bar.place(restingStep());
  bar.show();
  feedDiagrams();
  renderChrome();
}

/** A live run took over the diagrams: the step bar follows it, the examples stay to pick from. */
function goLive() {
  mode = "live";
  original = null;
  forkAsked = null;
  const bar = ensureStepBar();
  bar.reset();
  bar.show();
  examples?.live();
}

/** Keep the step bar with the run: follow while it streams, rest on the first token when it finishes. */
function followRun(msg) {
  if (!stepBar || mode !== "live") return;
  if (msg.type === "done" && !stepBar.moved) stepBar.place(restingStep());
  else if (msg.type === "step" && forkAsked && msg.forced) { stepBar.seek(msg.step); banner = null; if (forkAsked.continue) client.send({ type: "resume" }); forkAsked = null; }
  else if (msg.type === "step" || msg.type === "prefill") stepBar.follow();
  else stepBar.render();
}

async function replayRecording(id) {
  try {
    const body = await fetchJson(`/api/runs/${encodeURIComponent(id)}`);
    showRecording(body, "recording");
    fillForm(body.messages || [], { ...(body.params || {}), seed: body.seed ?? body.params?.seed });
    const live = $("#run-live");
    if (live) { live.href = `/?run=${encodeURIComponent(id)}`; live.hidden = false; }
    banner = { kind: "info", text: `A recorded run (${body.model_spec}, ${state.steps.length} steps): no model is running. "Run this live" runs it on the server.` };
  } catch (err) {
    banner = { kind: "error", at: Date.now(), text: `The recording could not be loaded: ${err.message}` };
  }
  feedDiagrams();
  renderChrome();
}

/** Send a diagram's request; details need a live session, which an example does not have. */
function request(msg) {
  const replaying = mode === "example" || mode === "recording";
  if (msg.type === "fork" && !replaying) { fork(msg); return; }
  if (!replaying || (mode === "example" && msg.type === "measure")) { client.send(msg); return; }
  if (msg.type === "measure") {  // a permalink replays with no socket: settle the button with a refusal
    state.apply({ type: "error", code: "no_server", field: null, message: "a recording replays without the server: measure on the live article" });
    feedDiagrams();
    return;
  }
  const where = mode === "example" ? "press Play, then ask again" : "open the article and run it live";
  banner = { kind: "info", at: Date.now(), text: `This needs a live run: ${where}.` };
  renderChrome();
}

/** Continue from `step` with another token: the server rewinds there (paused); the page resumes the branch. */
function fork(msg) {
  if (workshop.following) return;
  original ??= { steps: state.steps.slice(), done: state.done };
  forkAsked = { step: msg.step, token_id: msg.token_id, continue: Boolean(msg.continue) };
  client.send({ type: "fork", step: msg.step, token_id: msg.token_id });
  banner = { kind: "info", at: Date.now(), text: `Forking at step ${msg.step}: continuing with token ${msg.token_id}…` };
  renderChrome();
}

/** Show the run as it was before the first fork (the server keeps the branch; a new fork starts from it). */
function backToOriginal() {
  if (!original) return;
  state.steps = original.steps.slice();
  state.done = original.done;
  state.version += 1;
  original = null;
  banner = { kind: "info", at: Date.now(), text: "Back to the original run (before the fork)." };
  feedDiagrams();
  stepBar?.render();
  renderChrome();
}

function fillForm(messages, params) {
  fillPromptForm(messages, params, updateButtons);
  updateButtons();
}

/** "Run this live" (/?run=<id>): the recording's prompt and parameters in the form, run once connected. */
async function runRecordingLive(id) {
  try {
    const body = await fetchJson(`/api/runs/${encodeURIComponent(id)}`);
    fillForm(body.messages || [], { ...(body.params || {}), seed: body.seed ?? body.params?.seed });
  } catch (err) {
    banner = { kind: "error", at: Date.now(), text: `The recording could not be loaded: ${err.message}` };
    renderChrome();
    return;
  }
  const go = () => { if (connection.state === "open" && !$("#btn-play").disabled) { start(false); return true; } return false; };
  if (go()) return;
  const onState = () => { if (go()) client.removeEventListener("state", onState); };
  client.addEventListener("state", onState);
}

/** The first paint: the first shipped example, drawn before (and without) any socket message. */
function loadExamples(indexUrl) {
  examples = new ExamplePicker($("#example-bar"), indexUrl, (recording, byVisitor) => {
    if (mode === "live" && !byVisitor) return false; // the visitor's own run came first
    if (mode === "live" && LIVE.has(runPhase())) stopRun(); // the visitor picked a recording over the run going on
    showRecording(recording, "example");
    if (byVisitor) fillForm(recording.messages, recording.params);
    return true;
  });
  examples.load().catch((err) => console.warn("the example runs did not load", err));
}

function init() {
  findDiagrams();
  addExportBars();
  loadElements();
  document.addEventListener("he-request", (e) => { if (e.detail) request(e.detail); });
  const runId = document.querySelector("[data-run-id]")?.dataset.runId;
  if (runId) {
    connection = { state: "replay", retryAt: null };
    replayRecording(runId);
    return;
  }
  if (!$("#run-form")) return; // the model did not load: the page explains why, nothing to run
  for (const m of DEFAULT_MESSAGES) addMessage(m.role, m.content, updateButtons);
  bindRanges();
  bindButtons();
  $("#btn-original")?.addEventListener("click", backToOriginal);
  const fromRun = new URLSearchParams(location.search).get("run");
  if (fromRun) runRecordingLive(fromRun);
  recorder = new RunRecorder($("#btn-save"), $("#permalink"));
  workshop.bind($("#workshop-banner"), $("#params"), updateButtons);
  client.addEventListener("message", (e) => onMessage(e.detail));
  client.addEventListener("state", (e) => {
    connection = { ...e.detail, retryAt: e.detail.retryInMs != null ? Date.now() + e.detail.retryInMs : null };
    renderChrome();
  });
  // Countdowns (busy, reconnect) tick once a second.
  setInterval(() => { if (banner?.kind === "busy" || connection.state === "closed") renderChrome(); }, 1000);
  const examplesUrl = document.querySelector("[data-examples]")?.dataset.examples;
  if (examplesUrl) loadExamples(examplesUrl);
  client.connect();
  renderChrome();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
