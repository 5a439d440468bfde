// What the diagrams ask of the server (their bubbling `he-request` events): details, retempers, forks and
// measurements; a recording, which has no live session, says what each needs instead.
import { changed, client, page, pair, replaying, state, workshop } from "./page.js";
import { feedDiagrams } from "./diagrams.js";
import { fill, gettext } from "../lib/i18n.js";

/** Send a diagram's request; details need a live session, which an example does not have. */
export function request(asked) {
  const { auto, ...msg } = asked; // `auto`: a diagram asked on sight, not the visitor: nothing to say if refused
  if (auto && (replaying() || workshop.following)) return;
  if (msg.type === "fork" && !replaying()) { fork(msg); return; }
  if (!replaying() || (page.mode === "example" && msg.type === "measure")) { client.send(msg); return; }
  if (msg.type === "measure") {  // a permalink replays with no socket: settle the button with a refusal
    state.apply({ type: "error", code: "no_server", field: null, message: gettext("a recording replays without the server: measure on the live article") });
    feedDiagrams();
    return;
  }
  const text = page.mode === "example" ? gettext("This needs a live run: press Play, then ask again.")
    : gettext("This needs a live run: open the article and run it live.");
  page.banner = { kind: "info", at: Date.now(), text };
  changed();
}

/** Continue from `step` with another token: the server rewinds there (paused); the page resumes the branch. */
function fork(msg) {
  if (workshop.following) return;
  page.original ??= { steps: state.steps.slice(), done: state.done,
    b: pair.active ? { steps: pair.b.steps.slice(), done: pair.b.done, comparisons: pair.comparisons.slice() } : null };
  page.forkAsked = { step: msg.step, token_id: msg.token_id, continue: Boolean(msg.continue), run: msg.run ?? null };
  // Compare mode: `run` says which run takes the token ("a", "b" or "both"); the other re-steps from its own step n.
  client.send({ type: "fork", step: msg.step, token_id: msg.token_id, ...(msg.run && pair.active ? { run: msg.run } : {}) });
  page.banner = { kind: "info", at: Date.now(), text: fill(gettext("Forking at step %(step)s: continuing with token %(token)s…"), { step: msg.step, token: msg.token_id }) };
  changed();
}

/** Show the run as it was before the first fork (the server keeps the branch; a new fork starts from it). */
export function backToOriginal() {
  if (!page.original) return;
  state.steps = page.original.steps.slice();
  state.done = page.original.done;
  state.version += 1;
  if (page.original.b && pair.active) {
    Object.assign(pair.b, { steps: page.original.b.steps.slice(), done: page.original.b.done });
    pair.b.version += 1;
    pair.comparisons = page.original.b.comparisons.slice();
    pair.version += 1;
  }
  page.original = null;
  page.banner = { kind: "info", at: Date.now(), text: gettext("Back to the original run (before the fork).") };
  feedDiagrams();
  page.stepBar?.render();
  changed();
}
