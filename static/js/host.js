// The workshop host's page: live stats, the broadcast run and its controls, pins and limits
// (docs/protocol.md, "Workshop mode"). Everything from the server is drawn with textContent.

import { bindQuiz, quizOpen, renderQuiz } from "./host-quiz.js";

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
  return `${loc.protocol === "https:" ? "wss" : "ws"}://${loc.host}/ws/host/`;
}

function send(msg) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
  else setConnection("Not connected: the command was not sent.", "error");
}

function setConnection(text, kind = "info") {
  const node = $("#host-connection");
  node.textContent = text;
  node.dataset.kind = kind;
}

function connect() {
  setConnection("Connecting…");
  socket = new WebSocket(hostUrl());
  socket.addEventListener("open", () => { attempt = 0; received = 0; setConnection("Connected.", "ok"); });
  socket.addEventListener("message", (event) => {
    received += 1;
    if (received % ACK_EVERY === 0) send({ type: "ack", received });
    let msg;
    try { msg = JSON.parse(event.data); } catch { return; }
    if (msg && typeof msg.type === "string") onMessage(msg);
  });
  socket.addEventListener("close", (event) => {
    if (event.code === 4003) { setConnection("Not logged in as the host: reload the page and log in.", "error"); return; }
    const delay = Math.min(15000, 500 * 2 ** attempt++);
    setConnection(`Disconnected; reconnecting in ${Math.ceil(delay / 1000)} s.`, "error");
    setTimeout(connect, delay);
  });
}

// ---- numbers ------------------------------------------------------------------------------------

function bytes(n) {
  if (n == null) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function describe(obj) {
  const entries = Object.entries(obj || {}).filter(([, v]) => v != null);
  return entries.length ? entries.map(([k, v]) => `${k} = ${Array.isArray(v) ? JSON.stringify(v) : v}`).join(", ") : "";
}

function stat(name, text) {
  const node = document.querySelector(`[data-stat="${name}"]`);
  if (node) node.textContent = text;
}

// ---- server messages ----------------------------------------------------------------------------

function renderStats(s) {
  const processes = s.visitors.processes > 1 ? ` over ${s.visitors.processes} Daphne processes` : "";
  stat("connected", `${s.visitors.connected}${processes}`);
  const projectors = s.visitors.projectors ? ` (and ${s.visitors.projectors === 1 ? "your projector view" : `${s.visitors.projectors} projector views`}, not counted)` : "";
  stat("following", `${s.visitors.following}${projectors}`);
  stat("behind", String(s.visitors.behind ?? 0));
  stat("closed", String(s.visitors.closed ?? 0));
  stat("start-line", String(s.start_line ?? 0));
  const cap = s.limits.max_sessions != null ? ` (workshop limit ${s.limits.max_sessions})` : "";
  stat("generations", `${s.generations.active} of ${s.generations.limit}${cap}`);
  stat("queue", Object.entries(s.queue).map(([device, n]) => `${device}: ${n}`).join(", ") || "0");
  const m = s.model;
  stat("model", m.loaded ? `${m.name} (${m.family}, ${Number(m.parameters).toLocaleString()} parameters, ${m.dtype})`
    : `${m.spec}: not loaded yet (it loads on the first run)`);
  stat("device", s.device.name);
  if (s.workers) {  // REDIS_URL mode: the model runs on inference workers
    stat("workers", s.workers.map((w) => `${w.worker} (${w.model?.name ?? "model loading"}) on ${w.device.name}: ${w.sessions} sessions, `
      + `${w.generations.active} of ${w.generations.limit} generating, queue `
      + `${Object.values(w.queue).reduce((a, b) => a + b, 0)}, ${w.start_line ?? 0} in line to start, `
      + `${bytes(w.device.memory.used_bytes)} ${w.device.memory.kind === "cuda" ? "on the GPU" : "resident"}`).join("; ")
      || "none answering yet: loading the model, or restarting");
    const warning = $("#workers-warning");
    const silent = s.workers_silent || [];
    const back = [...wasSilent].filter((w) => !silent.includes(w) && s.workers.some((x) => x.worker === w));
    wasSilent = new Set(silent);
    if (back.length) cameBack = `${back.join(", ")} came back by itself: students press Play again.`;
    if (silent.length) cameBack = "";
    warning.hidden = !silent.length && !cameBack;
    warning.textContent = silent.length ? `Not answering: ${silent.join(", ")}. Under make workshop it restarts by `
      + "itself within seconds, and its students are told to press Play again (elsewhere, start it with `manage.py "
      + `runworker ${silent[0]}\`).` : cameBack;
  }
  const mem = s.device.memory;
  const where = mem.processes > 1 ? `${mem.processes} workers` : s.workers ? "the worker" : "this process";
  const what = mem.kind === "cuda" ? `allocated on the GPU by ${where}` : `resident in ${where}`;
  const reserved = mem.reserved_bytes != null ? `, ${bytes(mem.reserved_bytes)} reserved` : "";
  stat("memory", `${bytes(mem.used_bytes)} ${what}${reserved}, of ${bytes(mem.total_bytes)}`);
  const meter = $("#memory-meter");
  meter.max = mem.total_bytes || 1;
  meter.value = mem.used_bytes || 0;
  $("#pins-now").textContent = describe(s.pins) || "nothing";
  const limits = describe({ max_new_tokens: s.limits.max_new_tokens, max_sessions: s.limits.max_sessions });
  $("#limits-now").textContent = `${limits || "the server's"}; own runs ${s.limits.own_runs_allowed ? "allowed" : "off"}`;
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
    notes.push(`max_new_tokens ${form.elements.max_new_tokens.value} → ${cap} (limit)`);
  }
  const node = $("#broadcast-overrides");
  node.hidden = !notes.length;
  node.textContent = notes.length ? `Pinned, so the broadcast will run with: ${notes.join(", ")}.` : "";
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
  if (!b.id) { node.textContent = "No broadcast yet."; return; }
  const why = b.state === "finished" && b.stop_reason ? ` (${b.stop_reason.replaceAll("_", " ")})` : "";
  node.textContent = `Broadcast ${b.id}: ${b.state}${why}, step ${b.step ?? 0}.`;
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
    case "busy": setConnection(`Server busy: ${msg.reason}`, "busy"); break;
    case "error": setConnection(`Error ${msg.code}: ${msg.message}${msg.field ? ` (${msg.field})` : ""}`, "error"); break;
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
    setConnection("Connected.", "ok");
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
    if (window.confirm("End the broadcast and clear the pins and limits?")) { formsFilled = false; send({ type: "reset" }); }
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
