// The page's one WebSocket to the server (docs/protocol.md, "WebSocket").
//
// Events (all CustomEvent, `detail` = the parsed object):
//   "message"           every server message
//   "<type>"            the same message under its own type: session, prefill, step, done, status, busy, error, ...
//   "state"             {state: "connecting" | "open" | "closed", attempt, retryInMs}
// The socket reconnects with exponential backoff (with jitter) until close() is called.

const MIN_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;

export function sessionUrl(loc = window.location) {
  return `${loc.protocol === "https:" ? "wss" : "ws"}://${loc.host}/ws/session/`;
}

export class SessionClient extends EventTarget {
  #url;
  #socket = null;
  #attempt = 0;
  #timer = null;
  #closed = false;
  #queue = [];
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
      this.#setState("open");
      const pending = this.#queue.splice(0);
      for (const text of pending) socket.send(text);
    });
    socket.addEventListener("message", (event) => {
      if (socket !== this.#socket) return;
      if (typeof event.data !== "string") return;
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      if (!msg || typeof msg !== "object" || typeof msg.type !== "string") return;
      this.dispatchEvent(new CustomEvent("message", { detail: msg }));
      if (msg.type !== "message" && msg.type !== "state") this.dispatchEvent(new CustomEvent(msg.type, { detail: msg }));
    });
    socket.addEventListener("close", () => {
      if (socket !== this.#socket) return;
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
