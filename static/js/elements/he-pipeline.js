// <he-pipeline>: the map of the pipeline. It is the table of contents (each stage links to its section and
// the section in view is marked) and the live view of the page's step: each stage shows that step's key
// figure from the run, and the stages the step has reached are lit.
import { SteppedElement, define, el, showPiece, bytes } from "../lib/base-element.js";
import { promptFigure } from "../lib/spans.js";
import { decimal, fill, gettext, gettext_noop, grouped, ngettext } from "../lib/i18n.js";

const fixed = (x, d) => (x == null || !Number.isFinite(x) ? "–" : decimal(x, d));
/** A counted figure (ngettext's choice for `n`) with `n` filled in: "1 layer", "30 layers". */
const counted = (text, n) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });
const chars = (n) => fill(gettext("%(n)s chars"), { n });
const layers = (n) => counted(ngettext("%(n)s layer", "%(n)s layers", n), n);

/**
 * [section id, stage name (English: the data-stage of its link; shown translated), key figure of the run at
 * step k (k = 0: the prefill), or null]. The figures are worded when drawn, in the language drawn in.
 */
const STAGES = [
  ["try", gettext_noop("messages"), (rs) => rs.prefill?.template?.spans && promptFigure(rs.prefill.template.spans)],
  ["template", gettext_noop("template"), (rs) => rs.prefill?.template && chars(rs.prefill.template.text.length)],
  ["tokens", gettext_noop("tokens"), (rs) => rs.prefill?.tokens && counted(ngettext("%(n)s token", "%(n)s tokens", rs.prefill.tokens.length), rs.prefill.tokens.length)],
  ["embeddings", gettext_noop("embeddings"), (rs) => rs.prefill?.embeddings?.shape
    && counted(ngettext("%(n)s number each", "%(n)s numbers each", rs.prefill.embeddings.shape[1]), rs.prefill.embeddings.shape[1])],
  ["positions", gettext_noop("positions"), (rs) => rs.prefill?.positions?.scheme],
  ["mask", gettext_noop("mask"), (rs) => rs.prefill?.mask && `${rs.prefill.mask.size}×${rs.prefill.mask.size}`],
  ["attention", gettext_noop("attention"), (rs, s) => (s?.attention ? counted(ngettext("%(n)s key", "%(n)s keys", s.attention.keys), s.attention.keys)
    : rs.prefill?.attention && layers(rs.prefill.attention.layers))],
  ["layers", gettext_noop("layers"), (rs) => rs.model?.layers != null && layers(rs.model.layers)],
  ["logits", gettext_noop("logits"), (rs, s) => topLogit(s ? s.logits : rs.prefill?.logits)],
  ["stages", gettext_noop("stages"), (rs, s) => s?.stages && `T = ${rs.session?.params?.temperature ?? "–"}`],
  ["filter", gettext_noop("filter"), (rs, s) => s?.stages?.length && fill(gettext("%(n)s survive"), { n: s.stages[s.stages.length - 1].survivors })],
  ["dice", gettext_noop("dice"), (rs, s) => s?.token && `p = ${fixed(s.token.prob, 2)}`],
  ["sequence", gettext_noop("append"), (rs, s) => s?.token && `“${showPiece(s.token.text)}”`],
  ["kv", gettext_noop("KV cache"), (rs, s) => s?.kv && `KV ${bytes(s.kv.bytes)}`],
  ["stream", gettext_noop("stream"), (rs, s, k) => s && chars(rs.steps.slice(0, k).map((x) => x.text_delta).join("").length)],
  ["stop", gettext_noop("stop"), (rs, s, k) => (k && k === rs.steps.length && (rs.done?.stop_reason || s?.stop_reason)
    ? fill(gettext("stop: %(reason)s"), { reason: rs.done?.stop_reason || s.stop_reason }) : s ? gettext("continues") : null)],
  ["context", gettext_noop("context"), (rs, s) => s?.kv?.context_used != null && fill(gettext("%(percent)s used"), { percent: `${fixed(100 * s.kv.context_used, 1)}%` })],
  ["myths", gettext_noop("checks"), (rs) => checks(rs)],
  ["timeline", gettext_noop("serving"), (rs) => (Object.keys(rs.serving || {}).length
    ? fill(gettext("%(n)s measured"), { n: Object.keys(rs.serving).length }) : gettext("measure"))],
];
const LAST_PREFILL = STAGES.findIndex(([id]) => id === "logits");
const LAST_STEP = STAGES.findIndex(([id]) => id === "stream");
const STOP = STAGES.findIndex(([id]) => id === "stop");

function topLogit(logits) { return logits?.top?.length ? fill(gettext("top logit %(logit)s"), { logit: fixed(logits.top[0].logit, 1) }) : null; }

/** Scroll the map's own row (never the page) so the current stage is in it. */
function reveal(link) {
  const list = link.closest("ol");
  const item = link.parentElement;
  if (item.offsetLeft < list.scrollLeft || item.offsetLeft + item.offsetWidth > list.scrollLeft + list.clientWidth) {
    list.scrollLeft = item.offsetLeft - list.clientWidth / 3;
  }
}

function checks(rs) {
  const all = Object.values(rs.checks || {});
  return all.length ? fill(gettext("%(held)s/%(count)s held"), { held: all.filter((c) => c.passed).length, count: all.length }) : null;
}

class HePipeline extends SteppedElement {
  static titleReadout = false; // it sits in the sticky bar: its stages' titles stay tooltips
  #links = new Map(); // section id → <a>
  #inView = null;

  connectedCallback() {
    super.connectedCallback();
    if (this.#links.size) return;
    this.#build();
    this.#watchSections();
  }

  #build() {
    const toggle = el("button", { type: "button", class: "he-toggle", "aria-expanded": "false", "aria-controls": "he-list" }, gettext("Map"));
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      this.classList.toggle("open", open);
    });
    const list = el("ol", { class: "he-list", id: "he-list" });
    STAGES.forEach(([id, name], i) => {
      const link = el("a", { href: `#${id}`, class: "he-stage", "data-stage": name, "data-index": i });
      link.append(el("span", { class: "he-name" }, gettext(name)), el("span", { class: "he-fig" }, ""));
      const item = el("li");
      item.append(link);
      list.append(item);
      this.#links.set(id, link);
    });
    const nav = el("nav", { class: "he-map", "aria-label": gettext("Map of the pipeline (table of contents)") });
    nav.append(toggle, list);
    this.root.replaceChildren(nav);
  }

  /** Mark the link of the section nearest the top of the screen as the current location. */
  #watchSections() {
    const seen = new Map();
    const observer = new IntersectionObserver((entries) => {
      for (const e of entries) seen.set(e.target.id, e.isIntersecting);
      const first = [...this.#links.keys()].find((id) => seen.get(id));
      if (!first || first === this.#inView) return;
      this.#inView = first;
      for (const [id, link] of this.#links) {
        if (id === first) { link.setAttribute("aria-current", "location"); reveal(link); }
        else link.removeAttribute("aria-current");
      }
      this.dataset.inView = first;
    }, { rootMargin: "-25% 0px -60% 0px" });
    for (const id of this.#links.keys()) {
      const section = document.getElementById(id);
      if (section) observer.observe(section);
    }
  }

  render(rs) {
    const n = rs.steps.length;
    const k = this.step(n);
    const s = k ? rs.steps[k - 1] : null;
    const reached = !rs.prefill ? (rs.session ? 0 : -1) : !k ? LAST_PREFILL : (k === n && rs.done ? STOP : LAST_STEP);
    const prefilling = Boolean(rs.session && !rs.prefill && !rs.done); // the prompt's stages are computing now
    STAGES.forEach(([id, name, figure], i) => {
      const link = this.#links.get(id);
      const value = figure(rs, s, k) || (prefilling && i <= LAST_PREFILL ? gettext("prefilling") : null);
      link.querySelector(".he-name").textContent = gettext(name);
      link.querySelector(".he-fig").textContent = value || "–";
      link.classList.toggle("lit", i <= reached && i <= STOP);
      link.classList.toggle("reached", i === reached);
      link.title = fill(gettext("%(stage)s: %(figure)s (step %(step)s of %(count)s)"),
        { stage: gettext(name), figure: value || gettext("no figure yet"), step: k, count: n });
    });
    this.dataset.reached = reached >= 0 ? STAGES[reached][1] : "";
  }
}

define("he-pipeline", HePipeline);
