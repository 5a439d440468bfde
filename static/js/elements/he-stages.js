// <he-stages>: penalties → temperature → filters → softmax, the candidates before and after each stage,
// with a temperature slider that asks the server to re-apply the stages to this step's kept logits.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { requestFromServer } from "../run-view.js";
import { mount, readout, hover, chip, textsOf, linkIds, pct, int } from "../lib/widgets.js";
import { roving } from "../lib/pointer.js";
import { decimal, fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

const WHAT = {
  repetition_penalty: gettext_noop("divides positive logits of tokens already in the sequence"),
  presence_penalty: gettext_noop("subtracts p from tokens generated before"),
  frequency_penalty: gettext_noop("subtracts f × count of each generated token"),
  temperature: gettext_noop("divides every logit by T"),
  top_k: gettext_noop("keeps the k highest"),
  top_p: gettext_noop("keeps the smallest set holding probability p"),
  min_p: gettext_noop("keeps tokens with p ≥ min_p × the top p"),
};

/** A translated sentence as parts, `node` in place of its %(chip)s. */
function withChip(text, values, node) {
  const [before, after = ""] = fill(text, { ...values, chip: "\u0000" }).split("\u0000");
  return [before, node, after].filter((part) => part !== "");
}

/** A number an author wrote as an attribute, or null. */
const asked = (raw) => (raw != null && raw.trim() !== "" && Number.isFinite(Number(raw)) ? Number(raw) : null);

class HeStages extends SteppedElement {
  constructor() {
    super();
    this.whatIf = null; // {step, temperature} once the visitor moves the slider
    this.timer = 0;
  }

  #controls() {
    this.slider = el("input", { type: "range", min: "0", max: "2", step: "0.05", value: "1", "aria-label": gettext("temperature") });
    this.tOut = el("output", { class: "he-picker-out" });
    this.reset = el("button", { type: "button", class: "he-picker-latest" }, gettext("this run's temperature"));
    const box = el("div", { class: "he-picker he-temp" });
    box.append(el("span", { class: "he-picker-label" }, gettext("Temperature")), this.slider, this.tOut, this.reset);
    this.slider.addEventListener("input", () => {
      const t = Number(this.slider.value);
      const step = this.shownStep;
      if (!step) return;
      this.whatIf = { step, temperature: t };
      clearTimeout(this.timer);
      this.timer = setTimeout(() => requestFromServer(this, { type: "retemper", step, temperature: t }), 80);
      this.render(this.data);
    });
    this.reset.addEventListener("click", () => { this.whatIf = null; this.render(this.data); });
    linkIds(this);
    return box;
  }

  render(rs) {
    const tempBox = this.slider ? null : this.#controls();
    const body = mount(this, tempBox);
    if (this.session !== rs.session) { this.session = rs.session; this.whatIf = null; }
    const n = this.step(rs.steps.length);
    const step = n ? rs.steps[n - 1] : null;
    this.shownStep = n;
    const runT = rs.session?.params?.temperature ?? asked(this.getAttribute("temperature")) ?? 1; // an embed's, before its run
    if (this.whatIf && this.whatIf.step !== n) this.whatIf = null;
    const t = this.whatIf ? this.whatIf.temperature : runT;
    this.slider.value = String(t);
    this.slider.disabled = !step;
    this.tOut.textContent = decimal(t, 2);
    this.reset.hidden = !this.whatIf;
    if (!step) { delete this.dataset.stageCount; delete this.dataset.temperature; body.replaceChildren(caption(gettext("Waiting for the run: the stages run once a step samples."))); return; }

    const re = this.whatIf ? rs.retempers?.[n] || null : null;
    const pending = this.whatIf && (!re || Math.abs((re.params?.temperature ?? NaN) - t) > 1e-9);
    const stages = re ? re.stages : step.stages;
    const probs = re ? re.probs : step.probs;
    const params = { ...(rs.session?.params || {}), ...(re?.params || {}) };
    const texts = textsOf(step.logits.top, step.probs, re?.probs);
    this.dataset.stageCount = String(stages.length);
    this.dataset.step = String(n);
    this.dataset.temperature = String(re ? re.params.temperature : runT);
    const line = readout(gettext("Hover or tap a row: the same token lights up in every stage."));
    const vocab = step.logits.vocab_size;

    // The pipeline at a glance: every stage, applied or not, with the survivors after it.
    const pipe = el("ol", { class: "he-pipe" });
    pipe.append(el("li", { class: "he-pipe-on" }, fill(gettext("raw logits · %(n)s"), { n: int(vocab) })));
    const tokens = fill(ngettext("%(n)s token", "%(n)s tokens", vocab), { n: vocab == null || !Number.isFinite(Number(vocab)) ? "–" : grouped(vocab) });
    for (const s of stages) {
      const li = el("li", { class: s.applied ? "he-pipe-on" : "he-pipe-off" });
      const left = fill(ngettext("%(n)s left", "%(n)s left", s.survivors), { n: int(s.survivors) });
      li.append(el("b", {}, s.name), ` ${paramText(s.name, params)} · ${s.applied ? left : gettext("off")}`);
      const values = { name: s.name, what: WHAT[s.name] ? gettext(WHAT[s.name]) : "", left: int(s.survivors), tokens };
      hover(li, fill(s.applied ? gettext("%(name)s (%(what)s): applied, %(left)s of %(tokens)s left")
        : gettext("%(name)s (%(what)s): not applied, %(left)s of %(tokens)s left"), values), line);
      pipe.append(li);
    }
    pipe.append(el("li", { class: "he-pipe-on" }, gettext("softmax → probabilities")));

    // Columns: raw logits, every applied stage, the final distribution.
    const cols = el("div", { class: "he-cols" });
    const chosen = re ? re.token.id : step.token.id;
    cols.append(column(gettext("raw logits"), fill(gettext("%(n)s scores"), { n: int(vocab) }), step.logits.top.map((x) => ({ id: x.id, value: x.logit })), texts, line, false, chosen));
    for (const s of stages) {
      if (!s.applied) continue;
      cols.append(column(fill(gettext("after %(stage)s"), { stage: s.name }),
        fill(gettext("%(param)s · %(left)s of %(total)s left"), { param: shortParam(s.name, params), left: int(s.survivors), total: int(vocab) }), s.top, texts, line, false, chosen));
    }
    cols.append(column(gettext("softmax"), gettext("probability of each candidate"), probs.map((x) => ({ id: x.id, value: x.prob })), texts, line, true, chosen));

    const off = stages.filter((s) => !s.applied).map((s) => s.name);
    body.replaceChildren(pipe, whatIfBox(step, re, pending, t, runT), cols, line,
      caption(sentences([
        fill(off.length ? gettext("Step %(step)s: the %(vocab)s raw logits went through %(stages)s stages in transformers' order (off on this run: %(off)s), then softmax.")
          : gettext("Step %(step)s: the %(vocab)s raw logits went through %(stages)s stages in transformers' order (all applied), then softmax."),
        { step: n, vocab: int(vocab), stages: stages.length, off: off.join(", ") }),
        fill(gettext("Each column lists the %(top)s highest values after that stage; a bar shows how likely a row is next to the column's top row "
          + "(e^(logit − top logit), or p / top p for the softmax), so a lower temperature makes the bars fall off faster."), { top: step.logits.top.length }),
        gettext("A struck-out row was removed (its logit became −∞); shaded: the chosen token."),
        re ? fill(gettext("Showing the server's re-run at temperature %(t)s, not the run itself."), { t: String(re.params.temperature) })
          : fill(gettext("This run used temperature %(t)s."), { t: String(runT) }),
      ])));
  }
}

function paramText(name, params) {
  const v = params[name];
  if (v == null) return "";
  return name === "temperature" ? `T = ${v}` : `= ${v}`;
}

function shortParam(name, params) {
  const short = { temperature: "T", top_k: "k", top_p: "p", min_p: "min_p", repetition_penalty: gettext("penalty"), presence_penalty: "p", frequency_penalty: "f" };
  return `${short[name] || name} = ${params[name] ?? "?"}`;
}

function column(title, sub, rows, texts, line, isProb, chosen) {
  const col = el("div", { class: "he-col" });
  col.append(el("div", { class: "he-col-head" }, title), el("div", { class: "he-col-sub" }, sub));
  // Bar = how likely the row is relative to the column's top row: e^(logit − top logit), or p / top p.
  const finite = rows.filter((r) => r.value != null).map((r) => r.value);
  const top = finite.length ? Math.max(...finite) : 0;
  const rel = (v) => (isProb ? v / (top || 1) : Math.exp(v - top));
  for (const r of rows) {
    const text = texts.get(r.id);
    const removed = r.value == null;
    const row = el("div", { class: `he-srow${removed ? " he-removed" : ""}${r.id === chosen ? " he-srow-chosen" : ""}`, "data-id": r.id });
    const track = el("div", { class: "he-strack" });
    if (!removed) track.append(el("div", { class: `he-sbar${isProb ? " he-prob" : ""}`, style: `width:${rel(r.value) * 100}%` }));
    const id = fill(gettext("id %(id)s"), { id: r.id });
    row.append(chip(text ?? id, text == null ? null : r.id), track,
      el("span", { class: "he-sval" }, removed ? gettext("removed") : isProb ? pct(r.value) : fmt(r.value, 2)));
    const value = removed ? gettext("removed (−∞)") : isProb ? fill(gettext("probability %(p)s"), { p: String(r.value) })
      : fill(gettext("logit %(logit)s, e^(logit − top) = %(rel)s"), { logit: String(r.value), rel: fmt(rel(r.value), 4) });
    hover(row, `${title}: ${text == null ? "" : showPiece(text) + " "}(${id}) ${value}`, line, false);
    col.append(row);
  }
  roving(col.querySelectorAll(".he-srow")); // a column is one tab stop; arrow keys go down its rows
  return col;
}

function whatIfBox(step, re, pending, t, runT) {
  const box = el("div", { class: "he-whatif" });
  const ran = el("p");
  const took = step.greedy ? gettext("This run, at temperature %(t)s, took the argmax %(chip)s (p = %(p)s).")
    : step.forced ? gettext("This run, at temperature %(t)s, was forced by a fork to %(chip)s (p = %(p)s).")
      : gettext("This run, at temperature %(t)s, rolled u = %(u)s and picked %(chip)s (p = %(p)s).");
  ran.append(...withChip(took, { t: String(runT), u: String(step.draw?.u), p: pct(step.token.prob) }, chip(step.token.text, step.token.id, "he-chosen")));
  box.append(ran);
  if (pending) box.append(el("p", { class: "he-pending" }, fill(gettext("Asking the server to re-apply the stages at temperature %(t)s…"), { t: decimal(t, 2) })));
  if (re) {
    const p = el("p", { class: "he-whatif-answer" });
    const would = re.draw == null
      ? gettext("With temperature %(t)s (argmax, no dice) the model would pick: %(chip)s (p = %(p)s).")
      : gettext("With temperature %(t)s the same dice (u = %(u)s) would pick: %(chip)s (p = %(p)s).");
    p.append(...withChip(would, { t: String(re.params.temperature), u: String(re.draw?.u), p: pct(re.token.prob) }, chip(re.token.text, re.token.id, "he-chosen")));
    box.append(p);
  } else if (!pending) {
    box.append(el("p", { class: "he-muted" }, gettext("Move the temperature slider: the server re-applies the stages to this step's logits (no model run) and rolls the same dice.")));
  }
  return box;
}

define("he-stages", HeStages);
