// Compare mode on the article (issue 29): "Compare with…" opens run B's column of settings; Play and Step then
// start two runs of the prompt, step-locked. Run B's messages (`run: "b"`) fold into the page's CompareRun
// (`pair`, page.js), drawn by <he-compare> and by a second copy of the diagrams that have a compare form, laid
// beside run A's; the other diagrams say that they show run A.
import { $, LIVE, changed, client, page, pair, runPhase, state, workshop } from "./page.js";
import { SECTIONS } from "../embed-driver.js";
import { addTableAlternative } from "../lib/table-alt.js";
import { el } from "../lib/base-element.js";
import { fill, gettext } from "../lib/i18n.js";

// The diagrams drawn twice in compare mode, A beside B (each follows the page's one step bar).
const PAIRED = ["he-tokens", "he-logits", "he-filter", "he-dice", "he-kv", "he-stream", "he-timeline"];
const twins = new Map(); // run A's element -> {wrap, labelA, labelB, b (run B's element)}
const notes = new Map(); // a diagram that shows run A only -> its "Showing run A" note
let wrapped = false; // the twins and notes are made once, on the first compare, and kept (hidden) after it

/** Wire the compare column: "Compare with…" opens it, "Stop comparing" closes it (the next Play runs one run). */
export function bindCompare() {
  const box = $("#compare-params");
  const open = $("#btn-compare");
  if (!box || !open) return;
  // The server's EXPLAINER_COMPARE_MODELS (the template's options, and data-compare-models): none, no model menu.
  const select = $("#compare-model");
  if (select) select.closest("label").hidden = !box.dataset.compareModels?.trim() || select.options.length < 2;
  open.addEventListener("click", () => {
    page.compareOn = true;
    const details = box.closest("details");
    if (details) details.open = true;
    changed();
    box.querySelector("input, select")?.focus();
  });
  $("#btn-compare-stop")?.addEventListener("click", () => {
    page.compareOn = false;
    changed();
    open.focus();
  });
  document.addEventListener("he-seek", (e) => { if (Number.isInteger(e.detail?.step)) page.stepBar?.seek(e.detail.step); });
}

/** The `compare` object of a start (docs/protocol.md): run B's overrides of run A's params, its weights or model; null when off. */
export function readCompare() {
  const box = $("#compare-params");
  if (!page.compareOn || !box) return null;
  const params = {};
  for (const input of box.querySelectorAll("input[data-param]")) {
    if (input.value.trim() === "") continue; // blank: the same as run A
    const value = Number(input.value);
    params[input.dataset.param] = input.dataset.param === "seed" ? Math.trunc(value) : value;
  }
  const compare = Object.keys(params).length ? { params } : {};
  const model = $("#compare-model")?.value;
  if (model) compare.model = model; // another model reads its own weights: no int8 with it
  else if ($("#compare-weights")?.value === "int8") compare.weights = "int8";
  return compare;
}

/**
 * "Run this live" of a saved compare run: run B's column set as it was (B's session's `compare`: the parameters it
 * changed, its weights or model), so Play runs the pair again; a recording of one run closes the column.
 */
export function fillCompare(payloads) {
  const b = (payloads || []).find((p) => p?.type === "session" && p.run === "b")?.compare;
  const box = $("#compare-params");
  page.compareOn = Boolean(b && box);
  if (!page.compareOn) return;
  for (const input of box.querySelectorAll("input[data-param]")) {
    const value = b.changed?.[input.dataset.param];
    input.value = value == null ? "" : String(value);
  }
  const weights = $("#compare-weights");
  if (weights) weights.value = b.weights === "int8" ? "int8" : weights.options[0]?.value ?? "";
  const model = $("#compare-model");
  // Only a listed compare model is an option (run B of a params or int8 compare names the served model: no option)
  if (model) model.value = [...model.options].some((o) => o.value === b.model) ? b.model : "";
}

/** Whether run B would be run A again (the server refuses a compare that changes nothing). */
export function changesNothing(compare) {
  return !compare.params && !compare.model && !compare.weights;
}

/** A message of run B, or a `compare`: folded into the pair, drawn, and the step bar kept with the longer run. */
export function showCompare(msg) {
  if (page.mode !== "live") { changed(); return; } // a recording on show keeps the diagrams
  if (msg.type === "session") page.comparePending = false;
  if (msg.type === "step" || msg.type === "done") page.stepAsked = false; // run A may have ended: B's step answers a Step
  pair.apply(msg);
  page.recorder?.record(msg, page.lastStart); // "Save run" keeps both runs and the compares, in order
  followPair(msg);
  feedCompare();
  changed();
}

/** A recording on show: run B and the comparisons of a saved compare run (Replay.pairPayloads), else one run. */
export function showPairOf(replay) {
  pair.clear();
  page.comparePending = false;
  for (const msg of replay.pairPayloads) pair.apply(msg);
}

/** A fork in compare mode is answered by A's step n, B's step n and the comparison of step n: then it is done. */
function followPair(msg) {
  const { stepBar, forkAsked } = page;
  if (!stepBar) return;
  const forked = forkAsked && ((msg.type === "compare" && msg.step === forkAsked.step)
    // one run had ended before the fork's step: no comparison comes, the forked run's forced step ends it
    || (msg.type === "step" && msg.forced && msg.step === forkAsked.step && state.steps.length < msg.step));
  if (forked) {
    stepBar.seek(forkAsked.step);
    page.banner = null;
    if (forkAsked.continue) client.send({ type: "resume" });
    page.forkAsked = null;
  } else if (msg.type === "done" && !stepBar.moved) stepBar.place(pair.count);
  else if (msg.type === "step") stepBar.follow();
  else stepBar.render();
}

/** A fork asked by a diagram names its run in compare mode: the diagram's own (A's or B's); <he-compare> says "both". */
export function withRun(target, detail) {
  const b = target?.dataset?.run === "b"; // the composed event's target at the document: the diagram itself
  if (!pair.active) return b ? null : detail; // a twin left from a compare run asks nothing of a single run
  if (detail.type === "fork") return { ...detail, run: detail.run ?? (b ? "b" : "a") };
  if (!b) return detail;
  if (detail.type === "detail" || detail.type === "retemper") return { ...detail, run: "b" };
  // On sight, run A's twin (beside it) asks for the same server figures; B shares A's answers (CompareRun.apply).
  if (detail.type === "measure" && (detail.auto || detail.prompt === "article")) return null;
  return detail;
}

/** Whether the page shows a compare run (or one is on its way). */
export function comparing() {
  return pair.active || page.comparePending;
}

/** Put run A's element and a run B twin in one wrapper, side by side on a wide screen (made once, on the first compare). */
function twin(a) {
  if (twins.has(a)) return twins.get(a);
  const wrap = el("div", { class: "compare-pair" });
  const colA = el("div", { class: "compare-col", "data-run": "a" });
  const colB = el("div", { class: "compare-col", "data-run": "b" });
  const labelA = el("p", { class: "compare-label", "data-run": "a" });
  const labelB = el("p", { class: "compare-label", "data-run": "b" });
  const table = a.nextElementSibling?.classList.contains("he-table-alt") ? a.nextElementSibling : null;
  a.before(wrap);
  colA.append(labelA, a, ...(table ? [table] : []));
  const b = document.createElement(a.localName);
  b.dataset.run = "b";
  colB.append(labelB, b);
  wrap.append(colA, colB);
  addTableAlternative(b);
  customElements.whenDefined(b.localName).then(() => { if (comparing()) b.data = pair.b; });
  const entry = { wrap, labelA, labelB, b, colB };
  twins.set(a, entry);
  return entry;
}

/** Hand run B to its twins and the pair to <he-compare> (once each class is defined). */
export function feedCompare() {
  const on = comparing();
  for (const { b } of twins.values()) {
    if (on && customElements.get(b.localName)) b.data = pair.b;
  }
  const view = $("he-compare");
  if (view && customElements.get("he-compare")) view.data = pair;
}

/** Load <he-compare>, then draw it. */
export function loadCompare() {
  if (!$("he-compare")) return;
  import("../elements/he-compare.js")
    .then(() => customElements.whenDefined("he-compare"))
    .then(feedCompare)
    .catch((err) => console.warn("diagram he-compare did not load", err));
}

/** The compare column, the section, the twins and run B's reply, as the page's state says now (renderChrome calls it). */
export function renderCompare() {
  const box = $("#compare-params");
  if (!box) return;
  const open = $("#btn-compare");
  box.hidden = !page.compareOn;
  box.closest(".params-columns")?.classList.toggle("comparing", page.compareOn);
  open.setAttribute("aria-expanded", String(page.compareOn));
  open.disabled = workshop.following || Boolean($("#guess-mode")?.checked);
  const on = comparing();
  const section = $("#compare");
  if (section) section.hidden = !(on || page.compareOn);
  if (on && !wrapped) {
    wrapped = true;
    for (const name of PAIRED) for (const a of document.querySelectorAll(`article section > ${name}`)) twin(a);
    makeNotes();
  }
  const labelA = pair.active ? pair.label("a") : gettext("Run A");
  const labelB = pair.active ? pair.label("b") : gettext("Run B");
  for (const entry of twins.values()) {
    entry.wrap.classList.toggle("comparing", on);
    entry.colB.hidden = !on;
    entry.labelA.hidden = !on;
    setText(entry.labelA, labelA);
    setText(entry.labelB, labelB);
  }
  for (const note of notes.values()) {
    note.hidden = !on;
    setText(note, gettext("Showing run A only: this diagram has no side-by-side form."));
  }
  renderReplyB(on);
}

/** A "Showing run A" note before each diagram that has no run B twin. */
function makeNotes() {
  for (const section of SECTIONS) {
    const name = `he-${section}`;
    if (PAIRED.includes(name)) continue;
    for (const node of document.querySelectorAll(`article section > ${name}`)) {
      const note = el("p", { class: "compare-note" });
      node.before(note);
      notes.set(node, note);
    }
  }
}

function renderReplyB(on) {
  const box = $("#reply-b-box");
  if (!box) return;
  box.hidden = !on;
  const label = $("#reply-box .reply-label");
  if (label) {
    label.dataset.text ??= label.textContent;
    setText(label, !on ? label.dataset.text : pair.active ? fill(gettext("The reply of run %(label)s"), { label: pair.label("a") }) : gettext("The reply of run A"));
  }
  setText($("#reply-b-label"), pair.active ? fill(gettext("The reply of run %(label)s"), { label: pair.label("b") }) : gettext("The reply of run B"));
  const reply = $("#reply-b");
  reply.textContent = pair.b.done ? pair.b.done.text : pair.b.text;
  reply.classList.toggle("streaming", pair.bGoing && LIVE.has(runPhase()) && Boolean(pair.b.prefill));
  reply.classList.toggle("empty", !reply.textContent);
}

function setText(node, text) {
  if (node && node.textContent !== text) node.textContent = text;
}
