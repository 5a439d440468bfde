// The page's one WebSocket to the server (docs/protocol.md, "WebSocket").
//
// Events (all CustomEvent, `detail` = the parsed object):
//   "message"           every server message
//   "<type>"            the same message under its own type: session, prefill, step, done, status, busy, error, ...
//   "state"             {state: "connecting" | "open" | "closed", attempt, retryInMs}
// The socket reconnects with exponential backoff (with jitter) until close() is called.
//
// Flow control (docs/protocol.md, "Limits and flow control"): the client tells the server how many
// messages it has read on this socket, {type: "ack", received: N}: after ACK_EVERY unacked messages (at
// most every ACK_MIN_INTERVAL_MS, so acks stay far below the server's rate limit; at once past ACK_URGENT,
// before the server's window of 32 fills) and after ACK_IDLE_MS of quiet. A page that falls behind makes
// the server pause the run instead of queueing.

import { pageLanguage, withLanguage } from "./lib/i18n.js";

const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;
const ACK_EVERY = 8;
const ACK_URGENT = 24;
const ACK_MIN_INTERVAL_MS = 100;
const ACK_IDLE_MS = 250;

export function sessionUrl(loc = window.location) {
  return withLanguage(`${loc.protocol === "https:" ? "wss" : "ws"}://${loc.host}/ws/session/`, pageLanguage);
}

export class SessionClient extends EventTarget {
  #url;
  #socket = null;
  #attempt = 0;
  #timer = null;
  #closed = false;
  #queue = [];
  #received = 0; // server messages read on the current socket (what `ack` reports)
  #acked = 0;
  #ackedAt = -Infinity;
  #ackTimer = null;
  #parts = new PartAssembler();
  state = "closed";

  constructor(url = sessionUrl()) {
    super();
    this.#url = url;
  }

  /** Open the socket (idempotent). */
  connect() {
    this.#closed = false;
    if (this.#socket && this.#socket.readyState <= WebSocket.OPEN) return this;
    clearTimeout(this.#timer);
    this.#setState("connecting");
    let socket;
    try {
      socket = new WebSocket(this.#url);
    } catch (err) {
      this.#scheduleReconnect();
      return this;
    }
    this.#socket = socket;
    socket.addEventListener("open", () => {
      if (socket !== this.#socket) return;
      this.#attempt = 0;
      this.#received = 0; // the server counts per socket
      this.#parts = new PartAssembler(); // a message cut short by the old socket is dropped
      this.#acked = 0;
      this.#setState("open");
      const pending = this.#queue.splice(0);
      for (const text of pending) socket.send(text);
    });
    socket.addEventListener("message", (event) => {
      if (socket !== this.#socket) return;
      if (typeof event.data !== "string") return;
      this.#received += 1;
      try {
        this.#dispatch(event.data);
      } finally {
        this.#noteRead(socket); // acked once the page has handled it: a busy page slows the run down
      }
    });
    socket.addEventListener("close", () => {
      if (socket !== this.#socket) return;
      clearTimeout(this.#ackTimer);
      this.#ackTimer = null;
      this.#socket = null;
      if (this.#closed) this.#setState("closed");
      else this.#scheduleReconnect();
    });
    // An error is always followed by "close"; nothing to do here.
    socket.addEventListener("error", () => {});
    return this;
  }

  /** Send one client message (a plain object, see the protocol). Queued while (re)connecting. */
  send(msg) {
    const text = JSON.stringify(msg);
    if (this.#socket && this.#socket.readyState === WebSocket.OPEN) {
      this.#socket.send(text);
      return true;
    }
    // Only the latest few frames are kept: a stale queue after a long outage helps nobody.
    this.#queue.push(text);
    if (this.#queue.length > 8) this.#queue.shift();
    if (!this.#socket && !this.#timer) this.connect();
    return false;
  }

  /** Close for good (no reconnect). */
  close() {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = null;
    this.#queue = [];
    const socket = this.#socket;
    this.#socket = null;
    socket?.close();
    this.#setState("closed");
  }

  /** Reconnect now (e.g. a "retry" button), skipping the remaining backoff. */
  retryNow() {
    clearTimeout(this.#timer);
    this.#timer = null;
    this.connect();
  }

  #dispatch(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { msg = null; }
    if (!msg || typeof msg !== "object" || typeof msg.type !== "string") {
      // Never dropped in silence: the page shows that a frame could not be read.
      msg = { type: "error", code: "bad_frame", field: null, message: `a server message could not be read: ${text.slice(0, 80)}` };
    }
    msg = this.#parts.take(msg); // a split message is dispatched once, whole, after its last part
    if (!msg) return;
    this.dispatchEvent(new CustomEvent("message", { detail: msg }));
    if (msg.type !== "message" && msg.type !== "state") this.dispatchEvent(new CustomEvent(msg.type, { detail: msg }));
  }

  #noteRead(socket) {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = null;
    const unacked = this.#received - this.#acked;
    const due = unacked >= ACK_URGENT || (unacked >= ACK_EVERY && Date.now() - this.#ackedAt >= ACK_MIN_INTERVAL_MS);
    if (due) this.#ack(socket);
    else this.#ackTimer = setTimeout(() => { this.#ackTimer = null; this.#ack(socket); }, ACK_IDLE_MS);
  }

  #ack(socket) {
    if (socket !== this.#socket || socket.readyState !== WebSocket.OPEN || this.#received <= this.#acked) return;
    this.#acked = this.#received;
    this.#ackedAt = Date.now();
    socket.send(JSON.stringify({ type: "ack", received: this.#received }));
  }

  #scheduleReconnect() {
    const base = Math.min(MAX_DELAY_MS, MIN_DELAY_MS * 2 ** this.#attempt);
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    this.#attempt += 1;
    this.#setState("closed", delay);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => { this.#timer = null; this.connect(); }, delay);
  }

  #setState(state, retryInMs = null) {
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: { state, attempt: this.#attempt, retryInMs } }));
  }
}

/**
 * Reassembles messages the server split under its send cap (docs/protocol.md, "Messages larger than the
 * send cap"): a head with `parts: n` and then n `part` messages whose pieces append to the head's emptied
 * strings and lists. take(msg) returns the whole message, or null while parts are still due.
 *
 * A recording is data from anyone, and embed.js replays it on other sites' pages: a piece's path may only
 * name the head's own keys, down to a string or list it appends to. A path through `__proto__` once turned
 * Object.prototype.toString into a string for the whole page (issue 22, N7). A part with any other path
 * refuses its message: take() returns a `bad_part_path` error in its place and nothing of it is applied.
 */
export class PartAssembler {
  #head = null;

  take(msg) {
    if (msg.type !== "part") {
      if (this.#head) console.warn(`hit-enter: ${this.#head.type} dropped, its parts stopped arriving`);
      this.#head = null;
      if (!(msg.parts > 0)) return msg;
      this.#head = msg;
      return null;
    }
    const head = this.#head;
    if (!head || msg.of !== head.type) return null;
    const pieces = Array.isArray(msg.pieces) ? msg.pieces : [];
    const bad = pieces.find((piece) => !pieceTarget(head, piece));
    if (bad) return this.#refuse(head, bad);
    for (const piece of pieces) {
      const { parent, key } = pieceTarget(head, piece);
      if (typeof piece.text === "string") parent[key] += piece.text;
      else parent[key].push(...piece.items);
    }
    if (msg.index < head.parts) return null;
    this.#head = null;
    delete head.parts;
    return head;
  }

  #refuse(head, piece) {
    this.#head = null;  // its other parts find no head and are dropped
    const path = JSON.stringify(piece?.path ?? null).slice(0, 80);
    const message = `a ${String(head.type).slice(0, 20)} message was refused: a part's path ${path} is not one of its own strings or lists`;
    console.error(`hit-enter: bad_part_path: ${message}`);
    return { type: "error", code: "bad_part_path", field: "pieces", message };
  }
}

/** Keys a path may never name, even where an object has them as its own: they reach prototypes. */
const PROTOTYPE_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Where a piece appends: {parent, key} when its path descends through plain objects by their own keys to a
 * string (a `text` piece) or a list (an `items` piece); else null.
 */
function pieceTarget(head, piece) {
  const path = piece?.path;
  if (!Array.isArray(path) || path.length === 0) return null;
  let parent = head;
  for (let i = 0; i < path.length; i++) {
    const key = path[i];
    if (typeof key !== "string" || PROTOTYPE_KEYS.has(key)) return null;
    if (!isPlainObject(parent) || !Object.hasOwn(parent, key)) return null;
    if (i === path.length - 1) break;
    parent = parent[key];
  }
  const key = path[path.length - 1];
  const value = parent[key];
  if (typeof piece.text === "string") return typeof value === "string" ? { parent, key } : null;
  return Array.isArray(piece.items) && Array.isArray(value) ? { parent, key } : null;
}

function isPlainObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
