// Wires the article: prompt box, parameters, run buttons, status banner, streamed reply, and hands one
// RunView (folded from every server message) to every diagram on the page. The parts live beside it in article/:
// page (shared state), controls, chrome (banner, reply, buttons), diagrams, recordings (replays, examples, the
// step bar) and requests (what the diagrams ask of the server).
import { RunRecorder } from "../save-run.js";
import { errorWords } from "../error-words.js";
import { addMessage, bindRanges } from "../prompt-form.js";
import { $, changed, client, onChange, page, pair, quizCard, state, workshop } from "./page.js";
import { bindButtons } from "./controls.js";
import { renderChrome } from "./chrome.js";
import { addExportBars, feedDiagrams, findDiagrams, loadElements } from "./diagrams.js";
import { followRun, goLive, jumpToHostStep, loadExamples, lookAtHostStep, replayRecording, runRecordingLive } from "./recordings.js";
import { backToOriginal, request } from "./requests.js";
import { bindTokenCount, onCount } from "./token-count.js";
import { guess, holds, setGuessing } from "./guess.js";
import { pageLanguage } from "../lib/i18n.js";
import { bindCompare, loadCompare, showCompare, withRun } from "./compare.js";

// The prompt the page offers, in the page's language: model input, which the visitor may change and which is sent as
// it stands in the box (never translated on the way). The same sentences as inference/languages.py's.
const OFFERED = {
  en: "The mole on my face may need a biopsy. Explain this simply.",
  fr: "Le grain de beauté sur mon visage devra peut-être faire l'objet d'une biopsie. Explique-le simplement.",
  es: "Puede que el lunar de mi cara necesite una biopsia. Explícalo de forma sencilla.",
  "zh-hans": "我脸上的痣可能需要做活检。请简单地解释一下。",
};
const DEFAULT_MESSAGES = [{ role: "user", content: OFFERED[pageLanguage] ?? OFFERED.en }];
const RUN_MESSAGES = new Set(["prefill", "step", "done", "check", "detail", "retemper"]);

/** The banner a message deserves (a refusal, a busy server), or none once a run carries on. */
function noteBanner(msg) {
  if (msg.type === "error") {
    page.banner = { kind: "error", at: Date.now(), text: errorWords(msg) }; // a sentence for the reader, with its code
  } else if (msg.type === "busy" && !msg.what) { // a refused measurement (it names its `what`) is its diagram's to show
    page.banner = { kind: "busy", reason: msg.reason, until: Date.now() + 1000 * (msg.retry_after_s || 0) };
  } else if (msg.type === "status" && msg.reason === "left_queue") {
    page.banner = { kind: "info", at: Date.now(), text: msg.message }; // over the last run's "Finished", if any
  } else if (msg.type === "session" || msg.type === "prefill") {
    page.banner = null;
  } else if (page.banner?.kind === "error" && Date.now() - page.banner.at > 6000) {
    page.banner = null; // an old refusal should not hide a run that carries on
  }
}

function onMessage(msg) {
  if (msg.type === "tokenized") { onCount(msg); return; } // the prompt box's count: no part of the run
  if (quizCard.owns(msg)) return; // an answer to the host's question, or its refusal: the card says it
  if (msg.run === "b" || msg.type === "compare") { showCompare(msg); return; } // run B of a compare run (issue 29)
  if (holds(msg)) { changed(); return; } // guess mode: this step waits for the learner's pick
  show(msg);
}

/** A message drawn on the page: now, or when guess mode releases it. */
function show(msg) {
  noteBanner(msg);
  if (msg.type === "session") goLive();
  const leftLine = msg.type === "status" && msg.reason === "left_queue"; // a Stop while the start waited in line
  if (msg.type === "session" || msg.type === "done" || leftLine || (msg.type === "error" && page.stopping)) page.stopping = false;
  if (msg.type === "step" || msg.type === "error" || msg.type === "busy" || msg.type === "done" || msg.type === "session") page.stepAsked = false;
  // The prefill under way since Enter ends with its payload, the run's end, or a refusal of the start.
  if (msg.type === "prefill" || msg.type === "done" || msg.type === "error" || leftLine || (msg.type === "busy" && !msg.what)) page.starting = false;
  // A refused compare start brings no run B; a run that ended without one is a single run.
  if (msg.type === "done" || msg.type === "error" || leftLine || (msg.type === "busy" && !msg.what)) page.comparePending = false;
  // A recording on show (an example picked during a run) keeps the diagrams until the next live `session`.
  if (page.mode !== "live" && RUN_MESSAGES.has(msg.type)) { changed(); return; }
  if (msg.type === "error" && page.forkAsked) page.forkAsked = null;
  pair.apply(msg); // run A's new session clears run B; a re-taken step drops the comparisons from it on
  state.apply(msg);
  followRun(msg);
  page.recorder?.record(msg, workshop.following ? workshop.request : page.lastStart);
  page.recorder?.update(Boolean(state.done) && state.status?.state === "finished");  // after the closing checks
  feedDiagrams();
  changed();
}

function bindSocket() {
  client.addEventListener("message", (e) => onMessage(e.detail));
  client.addEventListener("state", (e) => {
    page.connection = { ...e.detail, retryAt: e.detail.retryInMs != null ? Date.now() + e.detail.retryInMs : null };
    changed();
  });
  // Countdowns (busy, reconnect) tick once a second: only the clock moved, so only the chrome redraws.
  setInterval(() => { if (page.banner?.kind === "busy" || page.connection.state === "closed") renderChrome(); }, 1000);
}

/** Keep focus clear of the sticky run bar: the page's scroll padding is the bar's height as it wraps now. */
function measureRunBar() {
  const bar = document.querySelector(".run-bar");
  if (!bar) return;
  const root = document.documentElement;
  new ResizeObserver(() => {
    root.style.setProperty("--run-bar-h", `${Math.ceil(bar.getBoundingClientRect().height)}px`);
    root.classList.add("run-bar-measured");
  }).observe(bar);
}

function init() {
  onChange(renderChrome);
  measureRunBar();
  findDiagrams();
  addExportBars();
  loadElements();
  loadCompare(); // a saved compare run replays beside its run A too
  document.addEventListener("he-request", (e) => {
    const asked = e.detail && withRun(e.target, e.detail); // compare mode: a fork names the diagram's run
    if (asked) request(asked);
  });
  const runId = document.querySelector("[data-run-id]")?.dataset.runId;
  if (runId) {
    page.connection = { state: "replay", retryAt: null };
    replayRecording(runId);
    return;
  }
  if (!$("#run-form")) return; // the model did not load: the page explains why, nothing to run
  for (const m of DEFAULT_MESSAGES) addMessage(m.role, m.content, changed);
  bindRanges();
  bindButtons();
  bindTokenCount();
  bindCompare();
  $("#btn-original")?.addEventListener("click", backToOriginal);
  const fromRun = new URLSearchParams(location.search).get("run");
  if (fromRun) runRecordingLive(fromRun);
  page.recorder = new RunRecorder($("#btn-save"), $("#permalink"));
  workshop.autoFollow = "present" in document.body.dataset; // the projector view (/host/present/)
  workshop.onLook = lookAtHostStep;
  workshop.onJump = jumpToHostStep;
  workshop.bind($("#workshop-banner"), $("#params"), changed);
  quizCard.bind($("#quiz-card"));
  guess.deliver = show;
  guess.feed = () => { feedDiagrams(); changed(); };
  $("#guess-mode")?.addEventListener("change", (e) => setGuessing(e.target.checked, page.recording));
  bindSocket();
  const examplesUrl = document.querySelector("[data-examples]")?.dataset.examples;
  if (examplesUrl) loadExamples(examplesUrl);
  client.connect();
  changed();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
