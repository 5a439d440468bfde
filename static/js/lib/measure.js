// The serving view's shared parts: the "Measure on this server" control (a `measure` request and its
// answer, docs/protocol.md), stat tiles, horizontal bars and a small SVG line chart.
import { SteppedElement, el } from "./base-element.js";
import { hover, int } from "./widgets.js";
import { roving } from "./pointer.js";
import { requestFromServer } from "../run-view.js";
import { decimal, fill, gettext } from "./i18n.js";

// Refusals that answer a `measure` frame (the draft model missing, a capacity field out of range), and the
// page's own `no_server` for a replay that has no socket to ask.
const MEASURE_ERRORS = new Set(["model_error", "out_of_range", "missing_field", "wrong_type", "invalid_value", "no_server"]);

/** A recording replayed with no server (/runs/<id>, or an embed of a run, example or src): nothing can be measured
 *  there, and the control says so from its first drawing (asking first, then redrawing, would move the page). */
const replayPage = (host) => Boolean(document.querySelector("[data-run-id]")) || ["run", "example", "src"].some((a) => host.hasAttribute(a));

/** "2026-11-30T12:34:56+00:00" → "2026-11-30 12:34 UTC". */
function when(iso) {
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(iso || "") ? `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC` : null;
}

/** A button that asks the server to measure `what`; pending until a new `serving[what]` (or a refusal) arrives.
 *  The first time its diagram comes into view it asks by itself, on the article's prompt (a result every
 *  visitor shares, so usually cached); while it runs, the server's `serving_progress` says what it measures. */
export class Measure {
  constructor(host, what, { label = gettext("Measure on this server"), fields = [], extra = () => ({}) } = {}) {
    Object.assign(this, { host, what, extra, pending: false, error: null, before: undefined, errorBefore: null, busyBefore: null, retry: 0 });
    this.fields = new Set([null, "what", "prompt", ...fields]);
    this.button = el("button", { type: "button", class: "he-measure", "data-what": what }, label);
    this.status = el("span", { class: "he-status", "aria-live": "polite" });
    this.node = el("div", { class: "he-measure-bar" });
    this.node.append(this.button, this.status);
    this.button.addEventListener("click", () => this.request());
    if (replayPage(host)) this.#needsServer();
    else this.#askWhenSeen();
  }

  /** A replay has no server: the control says so and links to this section on the live article. */
  #needsServer() {
    if (this.offline) return;
    this.offline = true;
    this.button.disabled = true;
    const section = this.host.closest("section[id]")?.id;
    const href = new URL(`/${section ? `#${section}` : ""}`, import.meta.url); // the site's, on an author's page too
    const link = el("a", { class: "he-live-link", href: href.origin === location.origin ? href.pathname + href.hash : href.href },
      gettext("open the live article to measure it"));
    this.note = el("span", { class: "he-needs-server" }, `${gettext("Measuring needs the live server:")} `);
    this.note.append(link);
    this.node.append(this.note);
  }

  /** Measure once the diagram is first on screen (not before: each one runs the model for seconds). */
  #askWhenSeen() {
    const seen = new IntersectionObserver((entries) => {
      if (!entries.some((e) => e.isIntersecting)) return;
      seen.disconnect();
      if (!this.pending && !this.host.data?.serving?.[this.what]) this.request({ prompt: "article" });
    });
    seen.observe(this.host);
  }

  request(options = {}) {
    if (this.offline) return;
    const extra = this.extra();
    if (extra == null) return; // the control's own inputs are not valid; it said why
    const rs = this.host.data;
    clearTimeout(this.retry);
    if (!this.pending) {
      this.before = rs?.serving?.[this.what];
      this.errorBefore = rs?.error ?? null;
    }
    this.busyBefore = rs?.servingBusy?.[this.what] ?? null;
    this.pending = true;
    this.asked = { ...options, ...extra };
    this.error = null;
    requestFromServer(this.host, { type: "measure", what: this.what, ...this.asked });
    this.#watch();
    if (rs) this.host.render(rs); // show "measuring…" at once
  }

  /** Settle a pending request from the state: its answer, a refusal, or a `busy` (ask again when it says). */
  #advance(rs) {
    if (!this.pending) return;
    const msg = rs?.serving?.[this.what];
    const err = rs?.error;
    const busy = rs?.servingBusy?.[this.what];
    if (msg && msg !== this.before) this.pending = false;
    else if (err && err !== this.errorBefore && err.code === "no_server") {
      this.pending = false; // an embedded recording has no server to ask: say so, as a replay page does
      this.#needsServer();
    } else if (err && err !== this.errorBefore && MEASURE_ERRORS.has(err.code) && this.fields.has(err.field ?? null)) {
      this.pending = false;
      this.error = err;
    } else if (busy && busy !== this.busyBefore) {
      this.busyBefore = busy; // another measurement holds the model: ask again when the server says
      this.waitUntil = Date.now() + 1000 * (busy.retry_after_s || 1);
      this.retry = setTimeout(() => this.request(this.asked), 1000 * (busy.retry_after_s || 1));
    }
  }

  /** Watch the state while pending, on screen or not (a diagram off screen does not render). */
  #watch() {
    clearInterval(this.watching);
    this.watching = setInterval(() => {
      this.#advance(this.host.data);
      if (this.pending) return;
      clearInterval(this.watching);
      this.host.data = this.host.data; // redraw when on screen
    }, 250);
  }

  /** Fold the state in; returns {data, pending, error, progress}: data only once this server's answer is here. */
  sync(rs) {
    this.#advance(rs);
    const msg = rs?.serving?.[this.what];
    const busy = this.pending ? rs?.servingBusy?.[this.what] ?? null : null;
    const progress = this.pending ? rs?.servingProgress?.[this.what] ?? null : null;
    this.button.disabled = this.pending || Boolean(this.offline);
    this.status.textContent = this.#statusText(msg, busy, progress);
    this.status.dataset.state = this.pending ? "pending" : this.error ? "error" : msg ? "done" : "idle";
    return { data: this.pending || this.error ? null : msg?.data ?? null, pending: this.pending, error: this.error, progress, busy };
  }

  #statusText(msg, busy, progress) {
    if (this.offline) return "";
    if (this.pending && busy && this.waitUntil > Date.now()) return fill(gettext("waiting: %(reason)s"), { reason: busy.reason });
    if (this.pending) {
      return progress ? fill(gettext("measuring %(what)s (part %(part)s of %(total)s)…"), { what: progress.label, part: progress.done + 1, total: progress.total })
        : gettext("measuring…");
    }
    if (this.error) return gettext("the server refused");
    if (!msg) return gettext("not measured yet");
    const at = when(msg.measured_at);
    if (!at) return gettext("measured on this server");
    const line = msg.prompt === "article" ? gettext("measured on this server on %(when)s, on the article's prompt")
      : msg.prompt === "yours" ? gettext("measured on this server on %(when)s, on your prompt") : gettext("measured on this server on %(when)s");
    return fill(line, { when: at }) + (msg.cached ? ` ${gettext("(kept from then)")}` : "");
  }

  /** What to show in place of the drawing while there is no data: the server's own progress while it measures. */
  placeholder({ pending, error, progress, busy }, idle) {
    if (pending && busy && this.waitUntil > Date.now()) {
      return el("p", { class: "he-pending-box" }, fill(gettext("Waiting for the model: %(reason)s. This diagram asks again in %(seconds)s s."),
        { reason: busy.reason, seconds: busy.retry_after_s }));
    }
    if (pending && progress) {
      const box = el("div", { class: "he-pending-box he-progress" });
      const bar = el("progress", { max: String(progress.total), value: String(progress.done), "aria-label": fill(gettext("%(what)s: %(done)s of %(total)s parts measured"), { what: this.what, ...progress }) });
      box.append(el("p", {}, fill(gettext("The server is measuring %(what)s: %(done)s of %(total)s parts done."), { what: progress.label, ...progress })), bar);
      return box;
    }
    if (pending) return el("p", { class: "he-pending-box" }, gettext("measuring… (the server runs the model now; it says what it measures as it goes)"));
    if (error) return el("p", { class: "he-error", role: "alert" }, fill(gettext("Error %(code)s: %(message)s"), error));
    if (this.offline) return el("p", { class: "he-idle" }, gettext("This is a recording: measurements are made on the live server, for its model."));
    return el("p", { class: "he-idle" }, idle);
  }
}

/** A grid of labelled numbers; each tile has a hover value. */
export function stats(items, line) {
  const node = el("dl", { class: "he-stats" });
  for (const [k, v, title, cls] of items) {
    const d = el("div", cls ? { class: cls } : {});
    d.append(el("dt", {}, k), el("dd", {}, v));
    hover(d, title, line, false);
    node.append(d);
  }
  roving(node.children); // one tab stop; arrow keys go from number to number
  return node;
}

/** Horizontal bars on one scale: rows [{label, value, text, title, cls}]. */
export function bars(rows, line, max = Math.max(...rows.map((r) => r.value), 0)) {
  const node = el("div", { class: "he-barlist he-barlist-measured" });
  for (const r of rows) {
    const row = el("div", { class: "he-brow" });
    const track = el("div", { class: "he-btrack" });
    track.append(el("div", { class: `he-bbar ${r.cls ?? ""}`.trim(), style: `width:${max > 0 ? Math.max(0, Math.min(1, r.value / max)) * 100 : 0}%` }));
    row.append(el("span", { class: "he-blabel he-wide" }, r.label), track, el("span", { class: "he-bval" }, r.text));
    hover(row, r.title, line);
    node.append(row);
  }
  roving(node.children);
  return node;
}

const NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text != null) node.textContent = String(text);
  return node;
}

/** Nice round ticks from 0 to at least `max`. */
function ticks(max, count = 4) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v <= max + step * 0.999; v += step) out.push(Number(v.toPrecision(6)));
  return out;
}

/** A line chart: series [{name, cls, points: [{x, y, title}]}], both axes from 0. */
export function lineChart(series, { xLabel, yLabel, line }) {
  const W = 340, H = 200, L = 44, R = 10, T = 10, B = 38;
  const xs = series.flatMap((s) => s.points.map((p) => p.x));
  const ys = series.flatMap((s) => s.points.map((p) => p.y));
  const xt = ticks(Math.max(...xs)), yt = ticks(Math.max(...ys));
  const X = (x) => L + (x / xt[xt.length - 1]) * (W - L - R);
  const Y = (y) => H - B - (y / yt[yt.length - 1]) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "he-chart", role: "img", "aria-label": fill(gettext("%(y)s against %(x)s"), { y: yLabel, x: xLabel }) });
  for (const v of yt) {
    root.append(svg("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "he-grid" }),
      svg("text", { x: L - 4, y: Y(v) + 3, class: "he-tick", "text-anchor": "end" }, int(v)));
  }
  for (const v of xt) root.append(svg("text", { x: X(v), y: H - B + 13, class: "he-tick", "text-anchor": "middle" }, int(v)));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, class: "he-axis-label", "text-anchor": "middle" }, xLabel),
    svg("text", { x: 10, y: (T + H - B) / 2, class: "he-axis-label", "text-anchor": "middle", transform: `rotate(-90 10 ${(T + H - B) / 2})` }, yLabel));
  for (const s of series) {
    root.append(svg("polyline", { points: s.points.map((p) => `${X(p.x)},${Y(p.y)}`).join(" "), class: `he-line ${s.cls}` }));
    for (const p of s.points) {
      const dot = svg("circle", { cx: X(p.x), cy: Y(p.y), r: 4.5, class: `he-dot ${s.cls}`, tabindex: 0 });
      dot.append(svg("title", {}, p.title));
      const show = () => { if (line) line.textContent = p.title; };
      for (const ev of ["pointerenter", "focus", "click"]) dot.addEventListener(ev, show);
      root.append(dot);
    }
  }
  return root;
}

/** A legend: [[cls, text], ...]. */
export function legend(items) {
  const node = el("p", { class: "he-legend" });
  for (const [cls, text] of items) node.append(el("span", { class: `he-key ${cls}` }), ` ${text}  `);
  return node;
}

/** Milliseconds, readable. */
export function ms(x) {
  if (x == null || !Number.isFinite(x)) return "–";
  return `${decimal(x, x >= 100 ? 0 : x >= 10 ? 1 : 2)} ms`;
}

/** A diagram drawn from one `serving` measurement: its button, then a placeholder or `draw(data, runState)`.
 *  Subclasses set the static fields: `what` (the measure), `label` (the button), `idle` (the placeholder
 *  text) and `attr` (the dataset key of the number tests read). */
export class MeasuredElement extends SteppedElement {
  render(rs) {
    const C = this.constructor;
    this.measure ??= new Measure(this, C.what, { label: gettext(C.label) });
    if (!this.view) {
      this.view = el("div", { class: "he-part" });
      this.root.replaceChildren(this.measure.node, this.view);
    }
    const state = this.measure.sync(rs);
    this.measure.button.textContent = gettext(C.label); // in the diagram's language, once its words are in
    if (state.error) this.dataset.error = state.error.code; else delete this.dataset.error;
    if (!state.data) {
      delete this.dataset[C.attr];
      this.view.replaceChildren(this.measure.placeholder(state, gettext(C.idle)));
      return;
    }
    this.draw(state.data, rs);
  }
}
