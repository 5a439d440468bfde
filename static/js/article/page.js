// The article page's shared state: one RunView folded from every server message, the socket, and what
// the page is showing. The article's modules (controls, chrome, diagrams, recordings, requests) share it;
// whoever changes it calls changed(), and the page's chrome (banner, reply, buttons) redraws from it.
import { RunView } from "../run-view.js";
import { SessionClient } from "../client.js";
import { WorkshopFollow } from "../workshop-follow.js";
import { QuizCard } from "../quiz-card.js";
import { stepFromUrl } from "../step-bar.js";
import { CompareRun } from "../compare-run.js";

export const $ = (sel) => document.querySelector(sel);
export const state = new RunView();
export const pair = new CompareRun(state); // run B and the comparisons, in compare mode (issue 29)
export const client = new SessionClient();
export const workshop = new WorkshopFollow(client); // listens first: following is current when the page redraws
export const quizCard = new QuizCard(client, workshop); // the host's question to the class, when following

export const page = {
  recorder: null,      // keeps the current run's payloads for "Save run"
  lastStart: null,     // the messages and params of the last start sent
  banner: null,        // {kind, text, until?} from the last message that deserves one
  connection: { state: "closed", retryAt: null },
  mode: "none",        // what the diagrams show: "example" or "recording" (stepped with the replay bar), or "live"
  stepBar: null,       // the page's one step scrubber (step-bar.js), for live runs and recordings alike
  wantedStep: stepFromUrl(), // #step=12 in the link: where a finished run or a recording opens
  original: null,      // the run as it was before the first fork: {steps, done}; "back to the original" shows it
  forkAsked: null,     // {step, token_id} of a fork sent and not yet answered
  examples: null,      // the shipped examples' picker (the article page only)
  stopping: false,     // Stop was pressed and the run's `done` has not come yet
  stepAsked: false,    // Step was pressed and its step has not come yet
  starting: false,     // a start was sent and its prefill has not come yet (nor a refusal): the prefill is under way
  hostStep: null,      // the workshop host's "everyone look at step N" for the broadcast followed, or null
  lastRunState: null,  // the run_state of the last status: whether a step came from a paused run (a Step)
  recording: null,     // the recording on show ({payloads, …}): guess mode folds it one step at a time
  compareOn: false,    // the compare column is open: Play and Step start two runs (article/compare.js)
  comparePending: false, // a compare start was sent and run B's session has not come yet (nor a refusal)
};

/** Whether the diagrams show a recording (an example or a permalink) rather than a live run. */
export function replaying() {
  return page.mode === "example" || page.mode === "recording";
}

export const LIVE = new Set(["queued", "prefilling", "running", "paused", "held"]); // a stop is accepted in each

/**
 * What the run is doing, as the server last said: idle, loading, queued, prefilling, running, paused, held, stopping,
 * or finishing (the reply has ended, `done` not in yet: the server is finishing the run's checks and takes no pause or stop).
 */
export function runPhase() {
  if (page.starting && state.status?.state === "loading") return "loading"; // the model loads before the prefill
  if (page.starting && state.status?.state === "queued") return page.stopping ? "stopping" : "queued"; // every slot taken: in line
  if (page.starting) return page.stopping ? "stopping" : "prefilling"; // from Enter on, before any recording shown
  if (replaying()) return "idle"; // a recording mid-way is not a run going on
  if (state.done && !pair.bGoing) return "idle"; // `done` is the run's last word (a fork clears it); run B may go on alone
  if (page.stopping) return "stopping";
  const s = state.status?.run_state || state.status?.state;
  if (s === "running" && replyEnded()) return "finishing";
  if (s === "running" || s === "paused" || s === "held" || s === "loading" || s === "prefilling") return s;
  if (state.prefill && s !== "finished") return replyEnded() ? "finishing" : "running";
  return "idle";
}

// The step that ends the reply carries its stop reason; `done` follows the run's checks (compare mode: run B may go on).
const replyEnded = () => !pair.active && Boolean(state.steps.at(-1)?.stop_reason);

const listeners = [];

/** Run `render` after every change: the module that draws need not be known to those that change. */
export function onChange(render) {
  listeners.push(render);
}

/** Say the state changed. Drawing happens now, not later: callers read the redrawn buttons right after. */
export function changed() {
  for (const render of listeners) render();
}
