// Two runs of one prompt, side by side and step-locked (issue 29; docs/protocol.md, "compare"): run A is the
// page's RunView as ever, run B is a second RunView folded from the messages marked `run: "b"`, and every step
// both runs took has one `compare` message (what parts them there), kept by step. <he-compare> draws this.
import { RunView } from "./run-view.js";
import { fill, gettext, gettext_noop } from "./lib/i18n.js";

// A changed parameter as a label says it: "temperature 1.3", "top-p 0.9", "seed 7" (other names as sent).
const PARAM_WORDS = {
  temperature: gettext_noop("temperature %(value)s"),
  top_p: gettext_noop("top-p %(value)s"),
  top_k: gettext_noop("top-k %(value)s"),
  min_p: gettext_noop("min-p %(value)s"),
  seed: gettext_noop("seed %(value)s"),
  max_new_tokens: gettext_noop("max new tokens %(value)s"),
};

export class CompareRun {
  /** `a`: the page's RunView of run A (read, never changed here). */
  constructor(a) {
    this.a = a;
    this.b = new RunView();
    this.comparisons = []; // `compare` messages, index = step - 1
    this.version = 0;
  }

  /** Whether a compare run is on the page: run B has said what it is. */
  get active() { return Boolean(this.b.session); }

  /** The steps either run took: the step bar's length in compare mode. */
  get count() { return Math.max(this.a.steps.length, this.active ? this.b.steps.length : 0); }

  /** The compare message of `step` (1-based), or null (one run ended earlier, or it has not come yet). */
  at(step) { return step > 0 ? this.comparisons[step - 1] ?? null : null; }

  /** The first step where the two runs drew different tokens, so far, or null. */
  get firstParting() {
    for (let i = this.comparisons.length - 1; i >= 0; i--) {
      const c = this.comparisons[i];
      if (c) return c.first_parting_step ?? null;
    }
    return null;
  }

  /** Whether run B is still generating (A may have ended first). */
  get bGoing() { return this.active && !this.b.done && this.b.status?.run_state !== "finished"; }

  /**
   * Fold one server message in; true when it was run B's or a `compare` (the caller shows nothing else of it).
   * Run A's messages pass through: a new `session` of A clears run B, a step of A re-taken (a fork) drops the
   * comparisons from its step on.
   */
  apply(msg) {
    if (msg.run === "b") {
      const { serving, servingProgress, servingBusy } = this.a; // measurements describe the server: B shares A's
      this.b.apply(msg);
      Object.assign(this.b, { serving, servingProgress, servingBusy });
      if (msg.type === "step") this.#cutFrom(msg.step);
      if (msg.type === "session") this.comparisons = [];
      this.version += 1;
      return true;
    }
    if (msg.type === "compare") {
      this.comparisons.length = Math.min(this.comparisons.length, msg.step - 1);
      this.comparisons[msg.step - 1] = msg;
      this.version += 1;
      return true;
    }
    if (msg.type === "session") this.clear();
    else if (msg.type === "step") this.#cutFrom(msg.step);
    return false;
  }

  /** One run again: run B and the comparisons go. */
  clear() {
    this.b = new RunView();
    this.comparisons = [];
    this.version += 1;
  }

  #cutFrom(step) {
    if (this.comparisons.length >= step) { this.comparisons.length = step - 1; this.version += 1; }
  }

  /** What run B changed, from its `session`'s `compare` (the server's word), as short phrases. */
  changes() {
    const compare = this.b.session?.compare || {};
    const out = [];
    for (const [name, value] of Object.entries(compare.changed || {})) out.push({ name, value, b: paramWords(name, value), a: paramWords(name, this.a.session?.params?.[name]) });
    if (compare.weights !== "int8" && compare.model && compare.model !== this.a.session?.model?.spec) {
      out.push({ name: "model", a: this.a.model?.name ?? gettext("the served model"), b: this.b.model?.name ?? compare.model });
    }
    if (compare.weights === "int8") out.push({ name: "weights", a: gettext("original weights"), b: gettext("int8 weights") });
    return out;
  }

  /** "A: temperature 0.2" / "B: temperature 1.3" (or "A: same settings" when B changed nothing). */
  label(run) {
    const changes = this.changes();
    const said = changes.length ? changes.map((c) => c[run]).join(", ") : gettext("same settings");
    return fill(run === "a" ? gettext("A: %(what)s") : gettext("B: %(what)s"), { what: said });
  }
}

function paramWords(name, value) {
  const words = PARAM_WORDS[name];
  const shown = value == null ? "–" : String(value);
  return words ? fill(gettext(words), { value: shown }) : `${name} ${shown}`;
}
