// <he-pipeline>: the map of the pipeline. It is the table of contents (each stage links to its section and
// the section in view is marked) and the live view of the page's step: each stage shows that step's key
// figure from the run, and the stages the step has reached are lit.
import { SteppedElement, define, el, showPiece, bytes } from "../lib/base-element.js";
import { promptFigure } from "../lib/spans.js";
import { plural } from "../lib/plural.js";

const fixed = (x, d) => (x == null || !Number.isFinite(x) ? "–" : x.toFixed(d));

/** [section id, stage name, key figure of the run at step k (k = 0: the prefill), or null]. */
const STAGES = [
  ["try", "messages", (rs) => rs.prefill?.template?.spans && promptFigure(rs.prefill.template.spans)],
  ["template", "template", (rs) => rs.prefill?.template && `${rs.prefill.template.text.length} chars`],
  ["tokens", "tokens", (rs) => rs.prefill?.tokens && `${plural(rs.prefill.tokens.length, "token")}`],
  ["embeddings", "embeddings", (rs) => rs.prefill?.embeddings?.shape && `${plural(rs.prefill.embeddings.shape[1], "number")} each`],
  ["positions", "positions", (rs) => rs.prefill?.positions?.scheme],
  ["mask", "mask", (rs) => rs.prefill?.mask && `${rs.prefill.mask.size}×${rs.prefill.mask.size}`],
  ["attention", "attention", (rs, s) => (s?.attention ? `${plural(s.attention.keys, "key")}` : rs.prefill?.attention && `${plural(rs.prefill.attention.layers, "layer")}`)],
  ["layers", "layers", (rs) => rs.model?.layers != null && `${plural(rs.model.layers, "layer")}`],
  ["logits", "logits", (rs, s) => topLogit(s ? s.logits : rs.prefill?.logits)],
  ["stages", "stages", (rs, s) => s?.stages && `T = ${rs.session?.params?.temperature ?? "–"}`],
  ["filter", "filter", (rs, s) => s?.stages?.length && `${s.stages[s.stages.length - 1].survivors} survive`],
  ["dice", "dice", (rs, s) => s?.token && `p = ${fixed(s.token.prob, 2)}`],
  ["sequence", "append", (rs, s) => s?.token && `“${showPiece(s.token.text)}”`],
  ["kv", "KV cache", (rs, s) => s?.kv && `KV ${bytes(s.kv.bytes)}`],
  ["stream", "stream", (rs, s, k) => s && `${rs.steps.slice(0, k).map((x) => x.text_delta).join("").length} chars`],
  ["stop", "stop", (rs, s, k) => (k && k === rs.steps.length && (rs.done?.stop_reason || s?.stop_reason) ? `stop: ${rs.done?.stop_reason || s.stop_reason}` : s ? "continues" : null)],
  ["context", "context", (rs, s) => s?.kv?.context_used != null && `${fixed(100 * s.kv.context_used, 1)}% used`],
  ["myths", "checks", (rs) => checks(rs)],
  ["timeline", "serving", (rs) => (Object.keys(rs.serving || {}).length ? `${Object.keys(rs.serving).length} measured` : "measure")],
];
const LAST_PREFILL = STAGES.findIndex(([id]) => id === "logits");
const LAST_STEP = STAGES.findIndex(([id]) => id === "stream");
const STOP = STAGES.findIndex(([id]) => id === "stop");

function topLogit(logits) { return logits?.top?.length ? `top logit ${fixed(logits.top[0].logit, 1)}` : null; }

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
  return all.length ? `${all.filter((c) => c.passed).length}/${all.length} held` : null;
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
    const toggle = el("button", { type: "button", class: "he-toggle", "aria-expanded": "false", "aria-controls": "he-list" }, "Map");
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      this.classList.toggle("open", open);
    });
    const list = el("ol", { class: "he-list", id: "he-list" });
    STAGES.forEach(([id, name], i) => {
      const link = el("a", { href: `#${id}`, class: "he-stage", "data-stage": name, "data-index": i });
      link.append(el("span", { class: "he-name" }, name), el("span", { class: "he-fig" }, ""));
      const item = el("li");
      item.append(link);
      list.append(item);
      this.#links.set(id, link);
    });
    const nav = el("nav", { class: "he-map", "aria-label": "Map of the pipeline (table of contents)" });
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
    STAGES.forEach(([id, , figure], i) => {
      const link = this.#links.get(id);
      const value = figure(rs, s, k) || (prefilling && i <= LAST_PREFILL ? "prefilling" : null);
      link.querySelector(".he-fig").textContent = value || "–";
      link.classList.toggle("lit", i <= reached && i <= STOP);
      link.classList.toggle("reached", i === reached);
      link.title = `${link.dataset.stage}: ${value || "no figure yet"} (step ${k} of ${n})`;
    });
    this.dataset.reached = reached >= 0 ? STAGES[reached][1] : "";
  }
}

define("he-pipeline", HePipeline);
