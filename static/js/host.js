// The workshop host's page: live stats, the broadcast run and its controls, pins and limits
// (docs/protocol.md, "Workshop mode"). Everything from the server is drawn with textContent.

import { bindQuiz, quizOpen, renderQuiz } from "./host-quiz.js";
import { decimal, fill, gettext, grouped, ngettext, pageLanguage, withLanguage } from "./lib/i18n.js";

const $ = (sel) => document.querySelector(sel);
const INT_FIELDS = new Set(["top_k", "max_new_tokens", "seed", "max_sessions"]);
let socket = null;
let attempt = 0;
let reply = "";
let formsFilled = false;
let wasSilent = new Set(); // workers not answering at the last stats, to say when one comes back
let cameBack = "";
let broadcast = {}; // the broadcast's summary: from the stats, kept current by its own frames in between
let quiz = null; // the class's question, from the stats: while it is open the run verbs wait for the reveal
let lookOffered = null; // the step last put in "Everyone look at step" (the host's own number stays until the next step)
let received = 0;   // messages read on this socket: acked so the broadcast never runs far ahead of the host
const ACK_EVERY = 8;

function hostUrl(loc = window.location) {
  return withLanguage(`${loc.protocol === "https:" ? "wss" : "ws"}://${loc.host}/ws/host/`, pageLanguage);
}

function send(msg) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
  else setConnection(gettext("Not connected: the command was not sent."), "error");
}

function setConnection(text, kind = "info") {
  const node = $("#host-connection");
  node.textContent = text;
  node.dataset.kind = kind;
}

function connect() {
  setConnection(gettext("Connecting…"));
  socket = new WebSocket(hostUrl());
  socket.addEventListener("open", () => { attempt = 0; received = 0; setConnection(gettext("Connected."), "ok"); });
  socket.addEventListener("message", (event) => {
    received += 1;
    if (received % ACK_EVERY === 0) send({ type: "ack", received });
    let msg;
    try { msg = JSON.parse(event.data); } catch { return; }
    if (msg && typeof msg.type === "string") onMessage(msg);
  });
  socket.addEventListener("close", (event) => {
    if (event.code === 4003) { setConnection(gettext("Not logged in as the host: reload the page and log in."), "error"); return; }
    const delay = Math.min(15000, 500 * 2 ** attempt++);
    setConnection(fill(gettext("Disconnected; reconnecting in %(seconds)s s."), { seconds: Math.ceil(delay / 1000) }), "error");
    setTimeout(connect, delay);
  });
}

// ---- numbers ------------------------------------------------------------------------------------

function bytes(n) {
  if (n == null) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${decimal(n, i ? 1 : 0)} ${units[i]}`;
}

function describe(obj) {
  const entries = Object.entries(obj || {}).filter(([, v]) => v != null);
  return entries.length ? entries.map(([k, v]) => `${k} = ${Array.isArray(v) ? JSON.stringify(v) : v}`).join(", ") : "";
}

function stat(name, text) {
  const node = document.querySelector(`[data-stat="${name}"]`);
  if (node) node.textContent = text;
}

/** One inference worker (REDIS_URL mode): its model, device, load and memory. */
function workerLine(w) {
  const line = w.device.memory.kind === "cuda"
    ? gettext("%(worker)s (%(model)s) on %(device)s: %(sessions)s sessions, %(active)s of %(limit)s generating, queue %(queue)s, "
      + "%(waiting)s in line to start, %(memory)s on the GPU")
    : gettext("%(worker)s (%(model)s) on %(device)s: %(sessions)s sessions, %(active)s of %(limit)s generating, queue %(queue)s, "
      + "%(waiting)s in line to start, %(memory)s resident");
  return fill(line, { worker: w.worker, model: w.model?.name ?? gettext("model loading"), device: w.device.name, sessions: w.sessions,
    active: w.generations.active, limit: w.generations.limit, queue: Object.values(w.queue).reduce((a, b) => a + b, 0),
    waiting: w.start_line ?? 0, memory: bytes(w.device.memory.used_bytes) });
}

/** The model's memory: how much, where (the GPU, else resident), reserved besides, out of the total. */
function memoryLine(mem, workers) {
  const where = mem.processes > 1 ? fill(ngettext("%(count)s worker", "%(count)s workers", mem.processes), { count: mem.processes })
    : workers ? gettext("the worker") : gettext("this process");
  const cuda = mem.kind === "cuda";
  const line = mem.reserved_bytes != null
    ? (cuda ? gettext("%(used)s allocated on the GPU by %(where)s, %(reserved)s reserved, of %(total)s")
      : gettext("%(used)s resident in %(where)s, %(reserved)s reserved, of %(total)s"))
    : (cuda ? gettext("%(used)s allocated on the GPU by %(where)s, of %(total)s") : gettext("%(used)s resident in %(where)s, of %(total)s"));
  return fill(line, { used: bytes(mem.used_bytes), where, reserved: bytes(mem.reserved_bytes), total: bytes(mem.total_bytes) });
}

// ---- server messages ----------------------------------------------------------------------------

function renderStats(s) {
  const v = s.visitors;
  stat("connected", v.processes > 1 ? fill(gettext("%(count)s over %(processes)s Daphne processes"), { count: v.connected, processes: v.processes })
    : `${v.connected}`);
  const projectors = v.projectors === 1 ? gettext("%(count)s (and your projector view, not counted)")
    : ngettext("%(count)s (and %(n)s projector view, not counted)", "%(count)s (and %(n)s projector views, not counted)", v.projectors);
  stat("following", v.projectors ? fill(projectors, { count: v.following, n: v.projectors }) : `${v.following}`);
  stat("behind", String(s.visitors.behind ?? 0));
  stat("closed", String(s.visitors.closed ?? 0));
  stat("start-line", String(s.start_line ?? 0));
  const generating = { active: s.generations.active, limit: s.generations.limit, cap: s.limits.max_sessions };
  stat("generations", fill(generating.cap != null ? gettext("%(active)s of %(limit)s (workshop limit %(cap)s)") : gettext("%(active)s of %(limit)s"), generating));
  stat("queue", Object.entries(s.queue).map(([device, n]) => `${device}: ${n}`).join(", ") || "0");
  const m = s.model;
  stat("model", m.loaded ? fill(ngettext("%(name)s (%(family)s, %(count)s parameter, %(dtype)s)", "%(name)s (%(family)s, %(count)s parameters, %(dtype)s)",
    Number(m.parameters)), { name: m.name, family: m.family, count: grouped(Number(m.parameters)), dtype: m.dtype })
    : fill(gettext("%(spec)s: not loaded yet (it loads on the first run)"), { spec: m.spec }));
  stat("device", s.device.name);
  if (s.workers) {  // REDIS_URL mode: the model runs on inference workers
    stat("workers", s.workers.map(workerLine).join("; ") || gettext("none answering yet: loading the model, or restarting"));
    const warning = $("#workers-warning");
    const silent = s.workers_silent || [];
    const back = [...wasSilent].filter((w) => !silent.includes(w) && s.workers.some((x) => x.worker === w));
    wasSilent = new Set(silent);
    if (back.length) cameBack = fill(gettext("%(workers)s came back by itself: students press Play again."), { workers: back.join(", ") });
    if (silent.length) cameBack = "";
    warning.hidden = !silent.length && !cameBack;
    warning.textContent = silent.length ? fill(gettext("Not answering: %(workers)s. Under make workshop it restarts by "
      + "itself within seconds, and its students are told to press Play again (elsewhere, start it with `manage.py "
      + "runworker %(worker)s`)."), { workers: silent.join(", "), worker: silent[0] }) : cameBack;
  }
  const mem = s.device.memory;
  stat("memory", memoryLine(mem, Boolean(s.workers)));
  const meter = $("#memory-meter");
  meter.max = mem.total_bytes || 1;
  meter.value = mem.used_bytes || 0;
  $("#pins-now").textContent = describe(s.pins) || gettext("nothing");
  const limits = describe({ max_new_tokens: s.limits.max_new_tokens, max_sessions: s.limits.max_sessions });
  $("#limits-now").textContent = fill(s.limits.own_runs_allowed ? gettext("%(limits)s; own runs allowed") : gettext("%(limits)s; own runs off"),
    { limits: limits || gettext("the server's") });
  renderOverrides(s.pins, s.limits);
  broadcast = s.broadcast || {};
  quiz = s.quiz ?? null;
  renderBroadcast();
  renderQuiz(quiz, broadcast, s.visitors.following);
  if (!formsFilled) fillForms(s);
}

/** Which of the broadcast form's fields the pins (and the token cap) will override, said next to the form. */
function renderOverrides(pins, limits) {
  const form = $("#broadcast-form");
  const notes = [];
  for (const input of form.querySelectorAll("input[type=number]")) {
    const pinned = Object.hasOwn(pins, input.name);
    input.classList.toggle("pinned", pinned);
    if (pinned && number(input) !== pins[input.name]) notes.push(`${input.name} ${input.value} → ${pins[input.name]}`);
  }
  const cap = limits.max_new_tokens;
  if (cap != null && !Object.hasOwn(pins, "max_new_tokens") && number(form.elements.max_new_tokens) > cap) {
    notes.push(fill(gettext("max_new_tokens %(value)s → %(cap)s (limit)"), { value: form.elements.max_new_tokens.value, cap }));
  }
  const node = $("#broadcast-overrides");
  node.hidden = !notes.length;
  node.textContent = notes.length ? fill(gettext("Pinned, so the broadcast will run with: %(changes)s."), { changes: notes.join(", ") }) : "";
}

// The run verbs each broadcast state accepts (docs/protocol.md, "Run states"); the others are disabled.
const VALID_VERBS = {
  starting: ["pause", "stop"], loading: ["pause", "stop"], prefilling: ["pause", "stop"],
  running: ["pause", "stop"], held: ["pause", "stop"], paused: ["step", "resume", "stop"],
};

function renderControls(state) {
  const valid = quizOpen(quiz) ? [] : VALID_VERBS[state] || [];
  for (const button of document.querySelectorAll("#broadcast-form [data-verb]")) {
    button.disabled = !valid.includes(button.dataset.verb);
  }
}

function renderBroadcast() {
  const b = broadcast;
  const node = $("#broadcast-state");
  renderControls(b.id ? b.state : null);
  $("#btn-look").disabled = !b.id;
  $("#look-step").max = String(b.step ?? 0);
  if (b.step !== lookOffered) { lookOffered = b.step; $("#look-step").value = String(b.step ?? 0); } // a new step: offer it
  if (!b.id) { node.textContent = gettext("No broadcast yet."); return; }
  const said = { id: b.id, state: b.state, reason: b.stop_reason?.replaceAll("_", " "), step: b.step ?? 0 };
  node.textContent = fill(b.state === "finished" && b.stop_reason ? gettext("Broadcast %(id)s: %(state)s (%(reason)s), step %(step)s.")
    : gettext("Broadcast %(id)s: %(state)s, step %(step)s."), said);
  node.dataset.state = b.state;
}

/** The pins and limits already in force, once, so a reloaded page does not undo them. */
function fillForms(s) {
  formsFilled = true;
  for (const box of document.querySelectorAll("#pins-form [data-pin]")) {
    const name = box.dataset.pin;
    box.checked = Object.hasOwn(s.pins, name);
    if (box.checked) document.querySelector(`#pins-form input[name="${name}"]`).value = s.pins[name];
  }
  const limits = $("#limits-form");
  limits.elements.max_new_tokens.value = s.limits.max_new_tokens ?? "";
  limits.elements.max_sessions.value = s.limits.max_sessions ?? "";
  limits.elements.own_runs_allowed.checked = s.limits.own_runs_allowed;
}

function showReply() {
  const node = $("#broadcast-reply");
  node.textContent = reply;
  node.classList.toggle("empty", !reply);
}

function onMessage(msg) {
  switch (msg.type) {
    case "host_stats": renderStats(msg); break;
    case "session": reply = ""; showReply(); break;
    case "step": reply += msg.text_delta; showReply(); broadcast.step = msg.step; renderBroadcast(); break;
    case "status": if (broadcast.id) { broadcast.state = msg.state; renderBroadcast(); } break;
    case "done": reply = msg.text; showReply(); broadcast.stop_reason = msg.stop_reason; renderBroadcast(); break;
    case "busy": setConnection(fill(gettext("Server busy: %(reason)s"), { reason: msg.reason }), "busy"); break;
    case "error": setConnection(fill(gettext("Error %(code)s: %(message)s"), { code: String(msg.code), message: String(msg.message) })
      + (msg.field ? ` (${msg.field})` : ""), "error"); break;
    default: break;
  }
}

// ---- the host's commands ------------------------------------------------------------------------

function number(input) {
  const value = Number(input.value);
  return INT_FIELDS.has(input.name) ? Math.trunc(value) : value;
}

function bindBroadcast() {
  const form = $("#broadcast-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const messages = [];
    if (form.elements.system.value.trim()) messages.push({ role: "system", content: form.elements.system.value });
    messages.push({ role: "user", content: form.elements.prompt.value });
    const params = {};
    for (const input of form.querySelectorAll("input[type=number]")) params[input.name] = number(input);
    setConnection(gettext("Connected."), "ok");
    send({ type: "broadcast", messages, params, paused: form.elements.paused.checked });
  });
  for (const button of form.querySelectorAll("[data-verb]")) {
    button.addEventListener("click", () => send({ type: button.dataset.verb }));
  }
  // "Everyone look at step N": the followers' step bars (and the projector view) go there.
  $("#btn-look").addEventListener("click", () => send({ type: "look", step: Math.trunc(Number($("#look-step").value)) }));
}

function bindPins() {
  const form = $("#pins-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = {};
    for (const box of form.querySelectorAll("[data-pin]")) {
      if (box.checked) params[box.dataset.pin] = number(form.querySelector(`input[name="${box.dataset.pin}"]`));
    }
    send({ type: "pin", params });
  });
  $("#btn-unpin").addEventListener("click", () => {
    for (const box of form.querySelectorAll("[data-pin]")) box.checked = false;
    send({ type: "pin", params: {} });
  });
}

function bindLimits() {
  const form = $("#limits-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const optional = (input) => (input.value.trim() === "" ? null : number(input));
    send({ type: "limits", max_new_tokens: optional(form.elements.max_new_tokens), max_sessions: optional(form.elements.max_sessions),
      own_runs_allowed: form.elements.own_runs_allowed.checked });
  });
}

function bindReset() {
  $("#btn-reset").addEventListener("click", () => {
    if (window.confirm(gettext("End the broadcast and clear the pins and limits?"))) { formsFilled = false; send({ type: "reset" }); }
  });
}

function init() {
  bindQuiz(send);
  bindReset();
  bindBroadcast();
  bindPins();
  bindLimits();
  connect();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
