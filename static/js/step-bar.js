// The page's one step scrubber (templates/index.html, #replay-bar), for live runs and recordings alike:
// first, previous, play/pause, next, last, a range over steps 0 … N and a "step k of N" readout. It moves
// `pageStep` (lib/base-element.js), which every diagram follows; the URL keeps it as #step=k.
import { pageStep } from "./lib/base-element.js";
import { fill, gettext } from "./lib/i18n.js";

const PLAY_INTERVAL_MS = 400;
const KEYS = { ArrowLeft: "prev", ArrowRight: "next", Home: "first", End: "last" };

/** The step asked for by the URL (#step=12), or null. */
export function stepFromUrl() {
  const m = /(?:^#|&)step=(\d+)/.exec(location.hash);
  return m ? Number(m[1]) : null;
}

export class StepBar {
  /** `count()` is how many steps the run has now; `onChange(position)` runs after every move. */
  constructor(root, count, onChange) {
    this.root = root;
    this.count = count;
    this.onChange = onChange;
    this.timer = null;
    this.moved = false; // the visitor put the step somewhere: a finishing run leaves it there
    this.range = root.querySelector("input[type=range]");
    this.readout = root.querySelector("output");
    this.buttons = Object.fromEntries([...root.querySelectorAll("button[data-replay]")].map((b) => [b.dataset.replay, b]));
    this.#bind();
  }

  get position() { return pageStep.at(this.count()); }
  get following() { return pageStep.selected == null; }

  #actions() {
    return {
      first: () => this.seek(0), prev: () => this.seek(this.position - 1), play: () => this.toggle(),
      next: () => this.seek(this.position + 1), last: () => this.seek(this.count()),
    };
  }

  #bind() {
    const actions = this.#actions();
    for (const [name, button] of Object.entries(this.buttons)) {
      button.addEventListener("click", () => { if (name !== "play") this.pause(); actions[name](); });
    }
    this.range.addEventListener("input", () => { this.pause(); this.seek(this.range.value); });
    const onKey = (event) => {
      if (this.root.hidden || !KEYS[event.key] || event.altKey || event.ctrlKey || event.metaKey || event.defaultPrevented) return;
      event.preventDefault(); // the range would move too, and twice is one step too many
      this.pause();
      actions[KEYS[event.key]]();
    };
    this.root.addEventListener("keydown", onKey);
    // Anywhere on the page that is not a control of its own, the arrow keys scrub too.
    document.addEventListener("keydown", (event) => {
      const t = event.target;
      if (t === document.body || t === document.documentElement || t?.matches?.("section, h2, p, he-pipeline")) onKey(event);
    });
  }

  /** Move to step `position` (clamped to 0 … N) by the visitor's hand; redraw and keep it in the URL. */
  seek(position) {
    this.moved = true;
    this.#set(position);
    this.#writeUrl();
  }

  /** Move without counting as the visitor's choice (a run finishing, a recording opening). */
  place(position) { this.#set(position); }

  /** Follow the newest step (a run streaming), unless the visitor moved. */
  follow() {
    if (!this.moved) pageStep.set(null);
    this.render();
  }

  /** A fresh run: follow it again, forget where the visitor was. */
  reset() { this.pause(); this.moved = false; pageStep.set(null); this.render(); }

  #set(position) {
    const n = this.count();
    const k = Math.max(0, Math.min(n, Math.trunc(Number(position)) || 0));
    pageStep.set(k);
    this.render();
    this.onChange(k);
  }

  #writeUrl() {
    const hash = `#step=${this.position}`;
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  toggle() { if (this.timer) this.pause(); else this.play(); }

  /** Advance one step per PLAY_INTERVAL_MS; from the end, start over at the prefill. */
  play() {
    if (this.timer || !this.count()) return;
    if (this.position >= this.count()) this.seek(0);
    this.timer = setInterval(() => {
      this.seek(this.position + 1);
      if (this.position >= this.count()) this.pause();
    }, PLAY_INTERVAL_MS);
    this.render();
  }

  pause() {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
    this.render();
  }

  show() { this.root.hidden = false; this.render(); }
  hide() { this.pause(); this.root.hidden = true; }

  render() {
    const focused = this.root.contains(document.activeElement);
    const n = this.count();
    const k = this.position;
    this.range.max = String(n);
    this.range.value = String(k);
    this.readout.textContent = fill(gettext("step %(step)s of %(count)s"), { step: k, count: n });
    this.root.dataset.position = String(k);
    this.root.dataset.steps = String(n);
    this.root.dataset.following = String(this.following);
    this.buttons.first.disabled = this.buttons.prev.disabled = k <= 0;
    this.buttons.next.disabled = this.buttons.last.disabled = k >= n;
    const playing = this.timer != null;
    this.buttons.play.textContent = playing ? "❚❚" : "▶"; // glyphs every system font has (⏸ is often missing)
    this.buttons.play.setAttribute("aria-label", playing ? gettext("Pause") : gettext("Play the steps"));
    this.buttons.play.title = playing ? gettext("Pause") : gettext("Play the steps, one every 0.4 s");
    this.buttons.play.setAttribute("aria-pressed", String(playing));
    this.buttons.play.disabled = n === 0;
    // A button disabled under the focus (⏭ at the end) would drop it: keep the keys on the bar.
    if (focused && (document.activeElement.disabled || !this.root.contains(document.activeElement))) this.root.focus();
  }
}
