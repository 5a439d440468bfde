// Step-through replay of a recorded run (a permalink or a shipped example): no socket, no model.
// `Replay` folds the recording's payloads up to a position (the page's step bar, step-bar.js, then picks the
// step every diagram shows); `ExamplePicker` lists the example runs shipped with the article.
import { PartAssembler } from "./client.js";
import { RunView } from "./run-view.js";
import { fill, gettext, pageLanguage } from "./lib/i18n.js";

/** A recording's payloads, foldable into the RunView of any position 0 … steps. */
export class Replay {
  constructor(payloads) {
    const all = joinParts(payloads);
    // A saved compare run (issue 29) holds run B's payloads (`run: "b"`) and the `compare`s among run A's: the
    // replay folds run A; `pairPayloads` are the rest, in order, for the page's CompareRun.
    this.payloads = all.filter((p) => p.run == null && p.type !== "compare");
    this.pairPayloads = all.filter((p) => p.run === "b" || p.type === "compare");
    // Where each step payload sits: position k folds everything before the (k + 1)-th of them.
    this.stepIndexes = this.payloads.flatMap((p, i) => (p.type === "step" ? [i] : []));
  }

  /** N: the number of recorded steps (positions run from 0, the prefill only, to N, the finished run). */
  get steps() { return this.stepIndexes.length; }

  clamp(position) { return Math.max(0, Math.min(this.steps, Math.trunc(Number(position)) || 0)); }

  /**
   * The run as it stood after `position` steps: session, prefill and checks, the first `position` steps;
   * `done` and the after-run checks only at the end. Folds into `state` (its session payload resets it).
   */
  stateAt(position, state = new RunView()) {
    const k = this.clamp(position);
    const end = k < this.steps ? this.stepIndexes[k] : this.payloads.length;
    for (let i = 0; i < end; i++) state.apply(this.payloads[i]);
    return state;
  }
}

/** Payloads with any split message (head + `part`s, as a socket carries it) joined back into one. */
export function joinParts(payloads) {
  const parts = new PartAssembler();
  return payloads.map((p) => parts.take(structuredClone(p))).filter(Boolean);
}

/** GET a JSON document; throws with the server's error message (or the HTTP status) when it fails. */
export async function fetchJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok || body == null) throw new Error(body?.error?.message || `HTTP ${response.status}`);
  return body;
}

/**
 * The examples shipped with the article (static/examples/index.json, written by `manage.py record_examples`):
 * a note naming the model and a <select> inside `bar`. `onPick(recording, byVisitor, whole)` draws one and returns
 * whether it did; a later pick wins over a slower earlier one. The first paint draws the page's language's example
 * (index.json's `lang`, else the first) from its `first_paint` file (no per-step attention rows); its whole file
 * replaces it (`whole` true) at the first scroll.
 */
export class ExamplePicker {
  constructor(bar, indexUrl, onPick) {
    this.bar = bar;
    this.select = bar.querySelector("select");
    this.note = bar.querySelector(".example-note");
    this.indexUrl = new URL(indexUrl, location.href);
    this.onPick = onPick;
    this.entries = [];
    this.ticket = 0;
    this.select.addEventListener("change", () => this.pick(this.select.value, true));
  }

  /** Fetch the index, list it, and draw the first example (the article's default prompt). */
  async load() {
    this.entries = await fetchJson(this.indexUrl);
    this.select.replaceChildren(...this.entries.map((entry) => {
      const option = document.createElement("option");
      option.value = entry.id;
      option.textContent = fill(gettext("%(title)s: “%(prompt)s”"), { title: entry.titles?.[pageLanguage] ?? entry.title, prompt: entry.prompt });
      return option;
    }));
    this.bar.hidden = !this.entries.length; // the list is there to pick from, whatever is drawn
    if (this.entries.length) await this.pick(this.first().id, false);
  }

  /** The example a page paints first: the article's prompt in the page's language (issue 28), else the first. */
  first() {
    const base = (code) => String(code).toLowerCase().split("-")[0];
    return this.entries.find((e) => e.lang && base(e.lang) === base(pageLanguage)) ?? this.entries[0];
  }

  async pick(id, byVisitor) {
    const entry = this.entries.find((e) => e.id === id);
    if (!entry) return;
    const ticket = ++this.ticket;
    const light = !byVisitor && entry.first_paint;
    const recording = await fetchJson(new URL(light || entry.file, this.indexUrl));
    if (ticket !== this.ticket) return;
    if (!this.onPick(recording, byVisitor)) { // a live run came first: the list stays, with nothing picked yet
      this.select.selectedIndex = -1;
      this.bar.hidden = false;
      return;
    }
    this.select.value = id;
    const model = recording.payloads[0]?.model?.name || recording.model_spec;
    this.note.textContent = fill(gettext("This is a recorded example run of %(model)s; press Play to run it live."), { model });
    this.bar.dataset.example = id;
    this.bar.hidden = false;
    delete this.bar.dataset.whole;
    if (light) this.#wholeLater(entry, ticket);
    else this.bar.dataset.whole = id; // the whole recording is drawn (tests and scripts wait on this)
  }

  /** The whole example once the visitor first scrolls, presses or types: not part of the first paint. */
  async #wholeLater(entry, ticket) {
    await firstInteraction();
    if (ticket !== this.ticket) return; // another pick, or a live run, came first
    const whole = await fetchJson(new URL(entry.file, this.indexUrl));
    if (ticket !== this.ticket) return;
    if (this.onPick(whole, false, true)) this.bar.dataset.whole = entry.id;
  }

  /** A live run (the visitor's own, or `hosts`: the workshop host's run a follower sees) replaced the example; a
   * pick still in flight must not bring it back. The picker stays. */
  live(hosts = false) {
    this.ticket += 1;
    delete this.bar.dataset.example;
    delete this.bar.dataset.whole;
    this.select.selectedIndex = -1; // so that picking any example, the last one too, is a change
    this.note.textContent = hosts ? gettext("The host's run is drawn below; pick an example to look at a recorded run instead.")
      : gettext("Your live run is drawn below; pick an example to look at a recorded run instead.");
  }
}

const INTERACTIONS = ["scroll", "wheel", "pointerdown", "keydown", "touchstart"];

/** Resolves at the visitor's first scroll, press or key on the page (an autofocus is not one). */
function firstInteraction() {
  return new Promise((resolve) => {
    const done = () => { for (const type of INTERACTIONS) removeEventListener(type, done, true); resolve(); };
    for (const type of INTERACTIONS) addEventListener(type, done, { capture: true, passive: true });
  });
}
