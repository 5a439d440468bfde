// The page's view of a run: what it knows of the run, folded only from server messages (docs/protocol.md).
// Not the server's state machine of a run (explainer/services/run/control.py), which the `status` message
// reports as `run_state`. Every diagram receives the same RunView through its `data` property.

import { fill, gettext, grouped, ngettext } from "./lib/i18n.js";

export class RunView {
  constructor() {
    this.session = null;   // the `session` message: model description, params
    this.prefill = null;   // the `prefill` payload
    this.steps = [];       // `step` payloads, index = step - 1
    this.done = null;      // the `done` payload
    this.status = null;    // the last `status` message
    this.error = null;     // the last `error` message
    this.busy = null;      // the last `busy` message
    this.details = {};     // `detail` payloads by detailKey(...)
    this.retempers = {};   // `retemper` payloads by step
    this.checks = {};      // `check` messages (live checks of "what did not happen") by name
    this.serving = {};     // `serving` messages (measured on this server) by `what`
    this.servingProgress = {}; // the last `serving_progress` of a measurement under way, by `what`
    this.servingBusy = {}; // the last `busy` that refused a measurement (it names its `what`), by `what`
    this.version = 0;      // bumps on every change
    this.forkable = true;  // false: a recording an embed replays, with no session on the server to fork
  }

  /** Fold one server message into the state; returns true when it changed. */
  apply(msg) {
    switch (msg.type) {
      // Serving measurements describe the server, not the run: a new run keeps them.
      case "session": Object.assign(this, new RunView(), { session: msg, forkable: this.forkable, serving: this.serving, servingProgress: this.servingProgress, servingBusy: this.servingBusy }); break;
      case "prefill": this.prefill = msg; this.steps = []; this.done = null; break;
      case "step": this.steps.length = msg.step - 1; this.steps.push(msg); this.done = null; this.#dropDetailsFrom(msg.step); break;
      // A stop cuts the run at the client's last step + 1: steps already on their way are not part of it.
      case "done": this.done = msg; this.steps.length = Math.min(this.steps.length, msg.steps); break;
      case "detail": this.details[detailKey(msg)] = msg; break;
      case "retemper": this.retempers[msg.step] = msg; break;
      case "check": this.checks[msg.name] = msg; break;
      case "serving": this.serving[msg.what] = msg; delete this.servingProgress[msg.what]; delete this.servingBusy[msg.what]; break;
      case "serving_progress": this.servingProgress[msg.what] = msg; break;
      case "status": this.status = msg; break;
      case "busy": if (msg.what) this.servingBusy[msg.what] = msg; else this.busy = msg; break;
      case "error": this.error = msg; break;
      default: return false;
    }
    if (msg.type !== "error" && msg.type !== "busy") this.busy = null;
    this.version += 1;
    return true;
  }

  /** A fork's step n replaces the branch from n on: the details asked of the old steps n … no longer hold. */
  #dropDetailsFrom(step) {
    for (const [key, detail] of Object.entries(this.details)) if (detail.step >= step) delete this.details[key];
  }

  get lastStep() { return this.steps[this.steps.length - 1] || null; }
  get model() { return this.session?.model || null; }

  /** The text generated so far, from the streamed deltas. */
  get text() { return this.steps.map((s) => s.text_delta).join(""); }
}

/** The prefill's own words, with the server's progress once it has said how long the prompt is. */
export function prefillText(status) {
  const total = status?.prompt_tokens;
  if (!Number.isInteger(total)) return gettext("Reading your prompt (prefill)…");
  const done = status.prefilled_tokens;
  const values = { done, n: grouped(total) };
  return done > 0 ? fill(ngettext("Reading your prompt (prefill)… %(done)s of %(n)s token", "Reading your prompt (prefill)… %(done)s of %(n)s tokens", total), values)
    : fill(ngettext("Reading your prompt (prefill)… %(n)s token", "Reading your prompt (prefill)… %(n)s tokens", total), values);
}

export function detailKey({ what, step, layer, head, position }) {
  return [what, step ?? "", layer ?? "", head ?? "", position ?? ""].join(":");
}

/** Elements ask for server work (detail, retemper, fork) with this bubbling event; the page sends it. */
export function requestFromServer(element, message) {
  element.dispatchEvent(new CustomEvent("he-request", { bubbles: true, composed: true, detail: message }));
}
