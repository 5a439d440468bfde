// Step-through replay of a recorded run (a permalink or a shipped example): no socket, no model.
// `Replay` folds the recording's payloads up to a position; `ReplayBar` (first, previous, play, next, last,
// a slider) moves it; `ExamplePicker` lists the example runs shipped with the article.
import { PartAssembler } from "./client.js";
import { RunState } from "./run-state.js";

const PLAY_INTERVAL_MS = 400;

/** A recording's payloads, foldable into the RunState of any position 0 … steps. */
export class Replay {
  constructor(payloads) {
    this.payloads = joinParts(payloads);
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
  stateAt(position, state = new RunState()) {
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
 * The replay bar (templates/index.html, #replay-bar): first, previous, play/pause, next, last, a range over
 * the positions and a "step k of N" readout; ←/→ (and Home/End) step while the bar has focus.
 * `onChange(state, position)` runs after every move, with `state` folded to the new position.
 */
export class ReplayBar {
  constructor(root, state, onChange) {
    this.root = root;
    this.state = state;
    this.onChange = onChange;
    this.replay = null;
    this.position = 0;
    this.timer = null;
    this.range = root.querySelector("input[type=range]");
    this.readout = root.querySelector("output");
    this.buttons = Object.fromEntries([...root.querySelectorAll("button[data-replay]")].map((b) => [b.dataset.replay, b]));
    this.#bind();
  }

  #bind() {
    const actions = {
      first: () => this.seek(0), prev: () => this.seek(this.position - 1), play: () => this.toggle(),
      next: () => this.seek(this.position + 1), last: () => this.seek(this.replay.steps),
    };
    for (const [name, button] of Object.entries(this.buttons)) {
      button.addEventListener("click", () => { if (name !== "play") this.pause(); actions[name](); });
    }
    this.range.addEventListener("input", () => { this.pause(); this.seek(this.range.value); });
    this.root.addEventListener("keydown", (event) => {
      const keys = { ArrowLeft: "prev", ArrowRight: "next", Home: "first", End: "last" };
      if (!this.replay || !keys[event.key] || event.altKey || event.ctrlKey || event.metaKey) return;
      event.preventDefault(); // the range would move too, and twice is one step too many
      this.pause();
      actions[keys[event.key]]();
    });
  }

  /** Show the bar for `replay`, at `position` (default: the finished run). */
  load(replay, position = replay.steps) {
    this.pause();
    this.replay = replay;
    this.range.max = String(replay.steps);
    this.root.hidden = false;
    this.seek(position);
  }

  /** Move to a position and redraw from it. */
  seek(position) {
    if (!this.replay) return;
    this.position = this.replay.clamp(position);
    this.replay.stateAt(this.position, this.state);
    this.#render();
    this.onChange(this.state, this.position);
  }

  toggle() { if (this.timer) this.pause(); else this.play(); }

  /** Advance one step per PLAY_INTERVAL_MS; from the end, start over at the prefill. */
  play() {
    if (!this.replay || this.timer) return;
    if (this.position >= this.replay.steps) this.seek(0);
    this.timer = setInterval(() => {
      this.seek(this.position + 1);
      if (this.position >= this.replay.steps) this.pause();
    }, PLAY_INTERVAL_MS);
    this.#render();
  }

  pause() {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
    this.#render();
  }

  /** Stop and hide (a live run took over the diagrams). */
  hide() {
    this.pause();
    this.replay = null;
    this.root.hidden = true;
  }

  #render() {
    const focused = this.root.contains(document.activeElement);
    const n = this.replay?.steps ?? 0;
    const k = this.position;
    this.range.value = String(k);
    this.readout.textContent = `step ${k} of ${n}`;
    this.root.dataset.position = String(k);
    this.root.dataset.steps = String(n);
    this.buttons.first.disabled = this.buttons.prev.disabled = k <= 0;
    this.buttons.next.disabled = this.buttons.last.disabled = k >= n;
    const playing = this.timer != null;
    this.buttons.play.textContent = playing ? "❚❚" : "▶"; // glyphs every system font has (⏸ is often missing)
    this.buttons.play.setAttribute("aria-label", playing ? "Pause" : "Play the steps");
    this.buttons.play.title = playing ? "Pause" : "Play the steps, one every 0.4 s";
    this.buttons.play.setAttribute("aria-pressed", String(playing));
    this.buttons.play.disabled = n === 0;
    // A button disabled under the focus (⏭ at the end) would drop it: keep the keys on the bar.
    if (focused && (document.activeElement.disabled || !this.root.contains(document.activeElement))) this.root.focus();
  }
}

/**
 * The examples shipped with the article (static/examples/index.json, written by `manage.py record_examples`):
 * a note naming the model and a <select> inside `bar`. `onPick(recording, byVisitor)` draws one and returns
 * whether it did; a later pick wins over a slower earlier one.
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
      option.textContent = `${entry.title}: “${entry.prompt}”`;
      return option;
    }));
    if (this.entries.length) await this.pick(this.entries[0].id, false);
  }

  async pick(id, byVisitor) {
    const entry = this.entries.find((e) => e.id === id);
    if (!entry) return;
    const ticket = ++this.ticket;
    const recording = await fetchJson(new URL(entry.file, this.indexUrl));
    if (ticket !== this.ticket || !this.onPick(recording, byVisitor)) return;
    this.select.value = id;
    const model = recording.payloads[0]?.model?.name || recording.model_spec;
    this.note.textContent = `This is a recorded example run of ${model}; press Play to run it live.`;
    this.bar.dataset.example = id;
    this.bar.hidden = false;
  }

  /** A live run replaced the example; a pick still in flight must not bring it back. */
  hide() {
    this.ticket += 1;
    this.bar.hidden = true;
  }
}
