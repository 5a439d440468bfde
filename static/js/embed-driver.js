// Feeds for embedded diagrams (docs/embedding.md): one RunView per recording or per live prompt, shared
// by every element that names it. A ReplayFeed folds a recording's payloads; a LiveFeed opens its own
// socket on /ws/embed/ and folds what the server sends. Either hands its state to its elements.
import { errorWords } from "./error-words.js";
import { RunView, prefillText } from "./run-view.js";
import { CompareRun } from "./compare-run.js";
import { SessionClient } from "./client.js";
import { fetchJson, joinParts } from "./replay.js";
import { fill, gettext, grouped, languageOf, ngettext, withLanguage } from "./lib/i18n.js";

/** The article's diagrams that can be embedded: the element of section S is <he-S>. */
export const SECTIONS = [
  "template", "tokens", "embeddings", "positions", "mask", "attention", "layers", "logits", "stages",
  "filter", "dice", "sequence", "kv", "stream", "stop", "context", "myths", "timeline", "kvcalc", "batch",
  "speculative", "quant",
];
// The article's anchor of each section, where it differs from the section's name (templates/index.html).
const ANCHORS = { batch: "batching", quant: "quantization" };
export const anchorOf = (section) => ANCHORS[section] ?? section;
// Sampling parameters a live embed takes as attributes (docs/protocol.md); the rest are the server's defaults.
export const PARAMS = ["temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
  "frequency_penalty", "max_new_tokens", "seed"];

/** The sampling parameters named by an element's attributes; a value that is not a number goes as is, so the server names the error. */
export function paramsOf(element) {
  const params = {};
  for (const name of PARAMS) {
    const raw = element.getAttribute(name);
    if (raw == null || raw.trim() === "") continue;
    const value = Number(raw);
    params[name] = Number.isFinite(value) ? value : raw;
  }
  return params;
}

class Feed extends EventTarget {
  constructor(origin) {
    super();
    this.origin = origin;
    this.state = new RunView();
    this.elements = new Set();
  }

  /** Whether the state is worth drawing: a recording once loaded (until then the element's fallback content shows). */
  get ready() { return true; }

  /** Draw `element` from this feed from now on (once its class is defined: an early property would shadow it). */
  attach(element) {
    this.elements.add(element);
    element.addEventListener("he-request", (event) => {
      event.stopPropagation();
      if (event.detail) { const { auto, ...message } = event.detail; this.request(message); } // `auto`: asked on sight
    });
    customElements.whenDefined(element.localName).then(() => { if (this.ready) element.data = this.state; });
  }

  /** Hand the state to every element and tell listeners (captions, the prompt box). */
  publish() {
    for (const element of this.elements) {
      if (this.ready && customElements.get(element.localName)) element.data = this.state;
    }
    this.dispatchEvent(new Event("change"));
  }

  /** Server work an element asks for (detail, retemper, fork, measure). */
  request(_message) {}
}

// The shipped example runs (static/examples/, listed in index.json), next to this module's folder.
const EXAMPLES = new URL("../examples/", import.meta.url);
const NOTICE_MS = 6000; // a refusal stays in the caption this long once the run carries on
const UNREACHABLE_MS = 10_000; // connecting this long without an open socket: the server is said to be gone

/**
 * A recording (GET /api/runs/<id>), a shipped example, or any recording file (`src`: a URL, or "#id" of a
 * <script type="application/json"> on the page): no model, no socket; requests are ignored.
 */
export class ReplayFeed extends Feed {
  constructor(origin, { run = null, example = null, src = null }, section = null) {
    super(origin);
    Object.assign(this, { runId: run, example, src, section, phase: "loading", failure: null, recording: null });
    this.pair = new CompareRun(this.state); // run B of a saved compare run, if the recording holds one
    this.state.forkable = false;  // no live run to continue from another token: the diagrams offer no fork
  }

  get ready() { return this.phase === "replay"; }

  /** The caption's line, in the language of the moment it is shown. */
  get text() {
    if (this.phase === "loading") return gettext("Loading the recording…");
    if (this.phase === "error") return fill(gettext("The recording could not be loaded: %(reason)s"), { reason: this.failure });
    const n = this.state.steps.length;
    const line = this.example
      ? ngettext("A recorded example (%(model)s, %(n)s step): no model is running.", "A recorded example (%(model)s, %(n)s steps): no model is running.", n)
      : ngettext("A recorded run (%(model)s, %(n)s step): no model is running.", "A recorded run (%(model)s, %(n)s steps): no model is running.", n);
    return fill(line, { model: String(this.recording.model_spec), n: grouped(n) });
  }

  /** The "full article" link: the recording's replay page (saved from the site), else the article, else none. */
  get articleUrl() {
    if (this.runId) return `${this.origin}/runs/${encodeURIComponent(this.runId)}`;
    if (this.src) return this.recording?.article_url ?? null;
    return `${this.origin}/`;
  }

  /** A saved run cut to this feed's section (GET /api/runs/<id>/<section>), or the whole run for the article. */
  #runUrl() {
    const part = this.section ? `/${encodeURIComponent(this.section)}` : "";
    return `${this.origin}/api/runs/${encodeURIComponent(this.runId)}${part}`;
  }

  /** A shipped example's file for this section (index.json's `slices`, else the whole run), next to this module:
   * static files, so a copy of static/ served without the server slices as well (it has no API to ask). */
  async #exampleFile() {
    const entry = (await fetchJson(new URL("index.json", EXAMPLES))).find((e) => e.id === this.example);
    if (!entry) throw new Error(fill(gettext("there is no example run \"%(example)s\""), { example: this.example }));
    return fetchJson(new URL(entry.slices?.[this.section] ?? entry.file, EXAMPLES).href);
  }

  async #recording() {
    if (this.src && !this.src.startsWith("#")) return fetchJson(this.src);
    if (this.src) {
      const script = document.getElementById(this.src.slice(1));
      if (!script) throw new Error(fill(gettext("there is no element %(id)s on the page"), { id: this.src }));
      return JSON.parse(script.textContent);
    }
    return this.example ? this.#exampleFile() : fetchJson(this.#runUrl());
  }

  /** A slice (docs/embedding.md) drawn by a section it was not cut for would show empty diagrams: refused by name. */
  #checkSlice(recording) {
    const slice = recording.slice;
    if (!slice || !this.section || (Array.isArray(slice.draws) && slice.draws.includes(this.section))) return;
    throw new Error(fill(gettext("this file is the %(slice)s slice of a recording, without what the %(section)s diagram draws; "
      + "download the %(section)s slice or the whole recording"), { slice: slice.section, section: this.section }));
  }

  /** Only a measurement asks for an answer; a replay has no server, so it settles with a refusal. */
  request(message) {
    if (message.type !== "measure") return;
    this.state.apply({ type: "error", code: "no_server", field: null, message: "a recording replays without the server" });
    this.publish();
  }

  async load() {
    try {
      const recording = await this.#recording();
      if (!Array.isArray(recording?.payloads)) throw new Error(gettext("it is not a recording (no payloads)"));
      this.#checkSlice(recording);
      this.recording = recording;
      // A saved compare run (issue 29): run A in this.state; run B's payloads and the compares in this.pair, which
      // an element with the `compare` attribute draws beside it (embed.js addTwin).
      for (const payload of joinParts(recording.payloads)) if (!this.pair.apply(payload)) this.state.apply(payload);
      this.pair.b.forkable = false; // a recording: run B has no live session to fork either
      this.phase = "replay";
    } catch (err) {
      this.phase = "error";
      this.failure = err.message;
    }
    this.publish();
    return this;
  }
}

/** A live session of its own on the server's /ws/embed/, opened on the first start (not on page load). */
export class LiveFeed extends Feed {
  constructor(origin, prompt, params, lang = null) {
    super(origin);
    this.lang = lang; // the server's own sentences (an error's detail, a busy reason) in the first element's language
    this.prompt = prompt;
    this.params = params;
    this.client = null;
    this.started = false; // a run was asked for (autostart goes once)
    this.connection = "closed";
    this.notice = null;   // the last error or busy message, until the next run begins
    this.lostSince = null; // when the socket was last asked for and not open (null: open, or never asked)
    this.lostTimer = 0;
  }

  /** Whether the server has been out of reach for UNREACHABLE_MS (the socket keeps retrying meanwhile). */
  get unreachable() { return this.lostSince != null && Date.now() - this.lostSince >= UNREACHABLE_MS; }

  #onState(state) {
    this.connection = state;
    clearTimeout(this.lostTimer);
    if (state === "open") this.lostSince = null;
    else {
      this.lostSince ??= Date.now();
      this.lostTimer = setTimeout(() => this.publish(), Math.max(0, this.lostSince + UNREACHABLE_MS - Date.now()) + 50);
    }
    this.publish();
  }

  get articleUrl() { return `${this.origin}/`; }

  get socketUrl() { return withLanguage(`${this.origin.replace(/^http/, "ws")}/ws/embed/`, this.lang); }

  /** Run the model on `prompt` (this feed's own prompt by default). */
  start(prompt = this.prompt) {
    this.prompt = prompt;
    this.notice = null;
    this.started = true;
    this.#connect().send({ type: "start", messages: [{ role: "user", content: prompt }], params: this.params });
    this.publish();
  }

  stop() { this.client?.send({ type: "stop" }); }

  /** Measurements need only the server; details, retempers and forks need this feed's run. */
  request(message) {
    if (message.type === "measure" || (this.client && this.state.session)) this.#connect().send(message);
  }

  #connect() {
    if (this.client) return this.client;
    this.client = new SessionClient(this.socketUrl);
    this.client.addEventListener("message", (event) => this.#onMessage(event.detail));
    this.client.addEventListener("state", (event) => this.#onState(event.detail.state));
    return this.client.connect();
  }

  #onMessage(message) {  // SessionClient acks what was read (docs/protocol.md, `ack`)
    if (message.type === "error" || message.type === "busy") this.notice = { ...message, at: Date.now() };
    else if (message.type === "session" || Date.now() - (this.notice?.at ?? 0) > NOTICE_MS) this.notice = null;
    this.state.apply(message);
    this.publish();
  }

  /** Where the run is: idle / connecting / unreachable / queued / prefilling / running / paused / finished / error / busy. */
  get phase() {
    const status = this.state.status?.state;
    if (this.notice) return this.notice.type === "busy" ? "busy" : "error";
    if (this.client && this.connection !== "open") return this.unreachable ? "unreachable" : "connecting";
    if (status === "finished" || (this.state.done && status !== "running")) return "finished";
    if (["running", "paused", "loading", "queued", "prefilling"].includes(status)) return status;
    if (status === "idle") return "idle"; // it left the line before its turn
    return this.state.prefill ? "running" : "idle";
  }

  get text() {
    const n = this.state.steps.length;
    const texts = {
      busy: () => fill(gettext("Server busy: %(reason)s. Press Play to retry."), { reason: this.notice.reason }),
      error: () => errorWords(this.notice),
      connecting: () => gettext("Connecting to the server…"),
      unreachable: () => fill(gettext("The Hit Enter server at %(host)s is not reachable; retrying."), { host: new URL(this.origin).host }),
      loading: () => gettext("Loading the model…"),
      queued: () => this.state.status.message,
      prefilling: () => prefillText(this.state.status),
      running: () => (n ? fill(gettext("Generating… step %(step)s"), { step: n }) : gettext("Reading the prompt…")),
      paused: () => fill(gettext("Paused after step %(step)s."), { step: n }),
      finished: () => fill(ngettext("Finished (%(reason)s) after %(n)s step, live on this server.",
        "Finished (%(reason)s) after %(n)s steps, live on this server.", n), { reason: this.state.done?.stop_reason ?? "stopped", n: grouped(n) }),
      idle: () => gettext("Press Play to run the model on this prompt."),
    };
    return texts[this.phase]();
  }
}

/** A `src` attribute as a full URL (relative to the page), or "#id" of an inline recording; null without one. */
function srcOf(element) {
  const raw = element.getAttribute("src")?.trim();
  if (!raw) return null;
  return raw.startsWith("#") ? raw : new URL(raw, document.baseURI).href;
}

/** One feed per recording or per (prompt, parameters): several elements naming the same share it. */
export class FeedRegistry {
  #feeds = new Map();

  constructor(origin) { this.origin = origin; }

  /** The feed an element's attributes name, or null when it names none (`src`, `run`, `example`, then `prompt`). */
  feedFor(element) {
    const src = srcOf(element);
    const run = element.getAttribute("run");
    const example = element.getAttribute("example");
    if (src || run || example) {
      const source = src ? { src } : run ? { run } : { example };
      const [kind, value] = Object.entries(source)[0];
      // One feed per section: each downloads only what its diagram draws (a slice, GET /api/runs/<id>/<section>).
      const section = element.localName.slice(3);
      return this.#get(`${kind}:${value}:${section}`, () => {
        const feed = new ReplayFeed(this.origin, source, section);
        feed.load();
        return feed;
      });
    }
    if (!element.hasAttribute("prompt")) return null;
    const prompt = element.getAttribute("prompt");
    const params = paramsOf(element);
    return this.#get(`live:${JSON.stringify([prompt, params])}`, () => new LiveFeed(this.origin, prompt, params, languageOf(element)));
  }

  #get(key, make) {
    if (!this.#feeds.has(key)) this.#feeds.set(key, make());
    return this.#feeds.get(key);
  }
}
