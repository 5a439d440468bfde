// <he-kvcalc>: how big the KV cache gets. On request, the server computes bytes per token for its
// own model and real configs (OPT-13B, Llama-2-7B, Llama-3-8B, Mistral-7B, Qwen2.5-7B-1M) with the
// formula per row, beside the bytes this run's cache actually held; and a capacity calculator.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, stats } from "../lib/measure.js";
import { roving } from "../lib/pointer.js";
import { fill, gettext, gettext_noop, grouped, ngettext } from "../lib/i18n.js";

const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2, int8: 1, fp8: 1, float64: 8 };
// Where each shipped config comes from (inference/kv_configs/*.json `_source`, the server sends it in English):
// marked here so the reader gets it in the page's language (tests/explainer/test_i18n.py keeps the lists equal).
export const SOURCES = [
  gettext_noop("meta-llama/Llama-2-7b-hf config.json (one KV head per query head)"),
  gettext_noop("meta-llama/Meta-Llama-3-8B config.json (grouped-query attention: 32 query heads share 8 KV heads)"),
  gettext_noop("mistralai/Mistral-7B-v0.1 config.json (grouped-query attention and a 4,096-token sliding window)"),
  gettext_noop("facebook/opt-13b config.json; Kwon et al. 2023 (vLLM): ~800 KB per token, up to 1.6 GB for 2,048 tokens"),
  gettext_noop("Qwen/Qwen2.5-7B-Instruct-1M config.json (a 1,010,000-token context; its sliding window is declared but off)"),
];
const OURS = " (this server)"; // the server's suffix to the loaded model's name (inference/serving.py)

/** A row's model name; the loaded model's says "(this server)" in the page's language. */
function rowName(r) {
  return r.key === "loaded" && r.name.endsWith(OURS) ? fill(gettext("%(name)s (this server)"), { name: r.name.slice(0, -OURS.length) }) : r.name;
}

/** bytes per token = 2 × layers × KV heads × head dim × bytes per element, with this row's numbers. */
function formulaText(r, bpe) {
  return fill(gettext("2 × %(layers)s layers × %(kv)s KV heads × %(dim)s head dim × %(bpe)s bytes = %(n)s bytes/token"),
    { layers: r.layers, kv: r.kv_heads, dim: r.head_dim, bpe: bpe ?? "?", n: int(r.bytes_per_token) });
}
const GIB = 1024 ** 3;
/** A count as the page writes it (thousands grouped), "–" when there is none. */
const num = (n) => (n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n));

class HeKvcalc extends SteppedElement {
  render(rs) {
    this.measure ??= new Measure(this, "kv", { label: gettext("Measure on this server") });
    this.capacity ??= new Measure(this, "capacity", { label: gettext("How many fit?"), fields: ["memory_bytes", "context_tokens"], extra: () => this.capacityFields() });
    if (!this.tablePart) {
      this.tablePart = el("div", { class: "he-part" });
      this.capPart = el("div", { class: "he-part" });
      this.memory = el("input", { type: "number", min: "0.001", step: "any", value: "80", name: "memory_gib", inputmode: "decimal" });
      this.context = el("input", { type: "number", min: "1", step: "1", value: "2048", name: "context_tokens", inputmode: "numeric" });
      const form = el("div", { class: "he-form" });
      const lab = (text, input) => { const l = el("label", {}); l.append(el("span", {}, text), input); return l; };
      form.append(lab(gettext("memory (GiB)"), this.memory), lab(gettext("context per visitor (tokens)"), this.context), this.capacity.node);
      this.root.replaceChildren(this.measure.node, this.tablePart, el("h3", { class: "he-subhead" }, gettext("How many visitors fit?")), form, this.capPart);
    }
    this.drawTable(rs);
    this.drawCapacity(rs);
  }

  capacityFields() {
    const gib = Number(this.memory.value), tokens = Math.trunc(Number(this.context.value));
    if (!(gib > 0) || !(tokens >= 1)) { this.capacity.status.textContent = gettext("enter a memory above 0 GiB and at least 1 token"); return null; }
    return { memory_bytes: Math.round(gib * GIB), context_tokens: tokens };
  }

  drawTable(rs) {
    const state = this.measure.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.optBytesPerToken;
      this.tablePart.replaceChildren(this.measure.placeholder(state,
        gettext("Press the button: the server computes the cache size of its own model and of five published models from their configs.")));
      return;
    }
    const opt = data.rows.find((r) => r.key === "opt-13b");
    if (opt) this.dataset.optBytesPerToken = String(opt.bytes_per_token); else delete this.dataset.optBytesPerToken;
    const line = readout(gettext("Hover or tap a cell for its formula and exact bytes."));
    const table = el("table", { class: "he-table he-kvtable" });
    const head = el("tr");
    const tokens = data.tokens.filter((n) => n > 1).map((n) => fill(ngettext("%(n)s token", "%(n)s tokens", n), { n: grouped(n) }));
    for (const h of [gettext("model"), gettext("bytes per token"), gettext("formula"), gettext("query / KV heads"), ...tokens]) head.append(el("th", { scope: "col" }, h));
    const thead = el("thead");
    thead.append(head);
    table.append(thead);
    const body = el("tbody");
    for (const r of data.rows) {
      const tr = el("tr", { class: r.key === "opt-13b" ? "he-hl" : r.key === "loaded" ? "he-ours" : null, "data-key": r.key });
      const name = el("th", { scope: "row" });
      name.append(el("span", r.key === "loaded" ? {} : { translate: "no" }, rowName(r))); // a model's name: a proper noun
      if (r.sliding_window) name.append(el("small", {}, ` ${fill(gettext("sliding window %(n)s"), { n: int(r.sliding_window) })}`));
      hover(name, `${rowName(r)}: ${r.source ? gettext(r.source) : gettext("this server's loaded config")}`, line);
      const gqa = r.query_heads && r.kv_heads && r.query_heads > r.kv_heads;
      const heads = el("td", { translate: "no" }, `${r.query_heads ?? "?"} / ${r.kv_heads}${gqa ? " GQA" : ""}`);
      const query = fill(ngettext("%(n)s query head", "%(n)s query heads", r.query_heads), { n: num(r.query_heads) });
      hover(heads, gqa
        ? fill(gettext("grouped-query attention: %(query)s share %(kv)s; the cache stores only the KV heads, %(ratio)s× less"),
          { query, kv: fill(ngettext("%(n)s KV head", "%(n)s KV heads", r.kv_heads), { n: num(r.kv_heads) }), ratio: r.query_heads / r.kv_heads })
        : fill(ngettext("%(n)s query head, one KV head each: no sharing", "%(n)s query heads, one KV head each: no sharing", r.query_heads), { n: num(r.query_heads) }), line);
      const per = el("td", { class: `he-num${r.key === "opt-13b" ? " he-keycell" : ""}` }, int(r.bytes_per_token));
      const bpe = DTYPE_BYTES[data.dtype];
      hover(per, `${formulaText(r, bpe)} (${bytes(r.bytes_per_token)})`, line);
      const formula = el("td", {}, `2 × ${r.layers} × ${r.kv_heads} × ${r.head_dim} × ${bpe ?? "?"}`);
      hover(formula, `${rowName(r)}: ${formulaText(r, bpe)}`, line);
      tr.append(name, per, formula, heads);
      for (const t of r.totals.filter((x) => x.tokens > 1)) { // 1 token is the bytes-per-token column
        const over = r.context_window && t.tokens > r.context_window;
        const capped = r.sliding_window && t.tokens >= r.sliding_window;
        const key = r.key === "opt-13b" && t.tokens === 2048;
        const td = el("td", { class: `he-num${over ? " he-over" : ""}${key ? " he-keycell" : ""}` }, bytes(t.total_bytes));
        hover(td, total(r, t, capped, over), line);
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    // One tab stop for the table's values: Left/Right along a model's row, Up/Down between models.
    roving(body.querySelectorAll("th, td"), { columns: body.rows[0]?.cells.length ?? 0 });
    const scroll = el("div", { class: "he-scroll capped he-wide-table", tabindex: "0", role: "region", "aria-label": gettext("KV cache sizes (scrollable)") });
    scroll.append(table);

    const formulaNote = fill(gettext("Formula: %(formula)s, in %(dtype)s (%(size)s bytes per element)."), { formula: gettext("2 (K and V) x layers x KV heads x head dim x bytes per element"), dtype: data.dtype, size: DTYPE_BYTES[data.dtype] ?? "?" });
    const parts = [el("p", { class: "he-scroll-hint" }, gettext("Scroll the table sideways for every column.")), scroll,
      el("p", { class: "he-col-sub" }, `${formulaNote} ${gettext("Greyed totals exceed the model's context window.")}`)];
    if (opt) {
      const at2048 = opt.totals.find((t) => t.tokens === 2048);
      const values = { bytes: int(opt.bytes_per_token), size: bytes(opt.bytes_per_token), total: int(at2048?.total_bytes), totalSize: bytes(at2048?.total_bytes) };
      parts.push(el("p", { class: "he-callout" }, fill(at2048
        ? gettext("OPT-13B: %(bytes)s bytes per token = %(size)s, the vLLM paper's \"800 KB\"; one 2,048-token request holds %(total)s bytes = %(totalSize)s, its \"up to 1.6 GB\".")
        : gettext("OPT-13B: %(bytes)s bytes per token = %(size)s, the vLLM paper's \"800 KB\"."), values)));
    }
    parts.push(this.liveCache(rs, data, line), line,
      caption(gettext("Computed on this server from each model's config (the layer count, KV heads and head size it declares); "
        + "your run's own cache is measured from its tensors.")));
    this.tablePart.replaceChildren(...parts);
  }

  /** The formula for this server's model beside the bytes the run's cache actually held. */
  liveCache(rs, data, line) {
    const ours = data.rows.find((r) => r.key === "loaded");
    const n = this.step(rs.steps.length);  // the cache as it stood after the page's step, not the run's last
    const kv = n ? rs.steps[n - 1].kv : rs.prefill?.kv;
    if (!ours) return el("p", {});
    if (!kv) return el("p", { class: "he-col-sub" }, gettext("Run a prompt to see your run's cache measured beside this server's row."));
    const size = DTYPE_BYTES[kv.dtype], tableSize = DTYPE_BYTES[data.dtype];
    const predicted = size && tableSize ? (ours.bytes_per_token / tableSize) * size * kv.stored_tokens : null;
    const same = predicted === kv.bytes;
    const check = same
      ? ngettext("%(per)s B/token in %(table)s × %(size)s/%(tableSize)s bytes per element (%(dtype)s) × %(n)s position = %(bytes)s bytes: equal to the measured cache",
        "%(per)s B/token in %(table)s × %(size)s/%(tableSize)s bytes per element (%(dtype)s) × %(n)s positions = %(bytes)s bytes: equal to the measured cache", kv.stored_tokens)
      : ngettext("%(per)s B/token in %(table)s × %(size)s/%(tableSize)s bytes per element (%(dtype)s) × %(n)s position = %(bytes)s bytes: the measured cache holds %(measured)s",
        "%(per)s B/token in %(table)s × %(size)s/%(tableSize)s bytes per element (%(dtype)s) × %(n)s positions = %(bytes)s bytes: the measured cache holds %(measured)s", kv.stored_tokens);
    const values = { per: int(ours.bytes_per_token), table: data.dtype, size, tableSize, dtype: kv.dtype, n: num(kv.stored_tokens), bytes: int(predicted), measured: int(kv.bytes) };
    const node = stats([
      [n ? fill(gettext("your cache after step %(step)s"), { step: n }) : gettext("your cache after the prefill"), bytes(kv.bytes),
        fill(gettext("step %(step)s's kv.bytes = %(bytes)s bytes (every cached key and value tensor)"), { step: n, bytes: int(kv.bytes) })],
      [gettext("positions"), int(kv.seq_len), `kv.seq_len = ${kv.seq_len}`],
      [gettext("measured per token"), `${int(kv.bytes_per_token)} B`,
        fill(ngettext("kv.bytes_per_token = %(bytes)s / %(n)s stored position", "kv.bytes_per_token = %(bytes)s / %(n)s stored positions", kv.stored_tokens),
          { bytes: int(kv.bytes), n: num(kv.stored_tokens) })],
      [fill(gettext("formula, in %(dtype)s"), { dtype: kv.dtype ?? "?" }),
        predicted != null ? (same ? fill(gettext("%(bytes)s B = measured"), { bytes: int(predicted) }) : `${int(predicted)} B`) : "–",
        predicted != null ? fill(check, values) : gettext("unknown dtype")],
    ], line);
    const wrap = el("div", { class: "he-live" });
    Object.assign(wrap.dataset, { kvBytes: String(kv.bytes), kvPositions: String(kv.seq_len), step: String(n) });
    wrap.append(el("p", { class: "he-col-sub" }, fill(gettext("This server's row, checked against your run's cache (%(dtype)s, the table assumes %(table)s):"),
      { dtype: kv.dtype ?? gettext("unknown dtype"), table: data.dtype })), node);
    return wrap;
  }

  drawCapacity(rs) {
    const state = this.capacity.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.visitors;
      this.capPart.replaceChildren(this.capacity.placeholder(state,
        gettext("Pick a memory size and a context length; the server divides what is left after its weights by one visitor's cache.")));
      return;
    }
    this.dataset.visitors = String(data.visitors);
    const line = readout(gettext("Hover or tap a number for how it was computed."));
    const free = data.memory_bytes - data.weight_bytes;
    this.capPart.replaceChildren(
      el("p", { class: "he-big he-visitors" }, fill(ngettext("%(n)s visitor's cache fits", "%(n)s visitors' caches fit", data.visitors), { n: num(data.visitors) })),
      stats([
        [gettext("memory"), bytes(data.memory_bytes), fill(gettext("%(n)s bytes"), { n: int(data.memory_bytes) })],
        [gettext("weights"), bytes(data.weight_bytes), fill(gettext("%(n)s bytes of this server's weights, loaded once for everyone"), { n: int(data.weight_bytes) })],
        [gettext("one visitor's cache"), bytes(data.kv_bytes_per_visitor), fill(ngettext("%(n)s token in %(dtype)s: %(bytes)s bytes", "%(n)s tokens in %(dtype)s: %(bytes)s bytes", data.context_tokens),
          { n: num(data.context_tokens), dtype: data.dtype, bytes: int(data.kv_bytes_per_visitor) })],
        [gettext("visitors"), int(data.visitors), `floor((${int(data.memory_bytes)} − ${int(data.weight_bytes)}) / ${int(data.kv_bytes_per_visitor)}) = ${int(data.visitors)}`],
      ], line),
      line,
      caption(`${fill(free < 0
        ? ngettext("Computed on this server for its own model: (memory − weights) / one cache of %(n)s token; the weights alone do not fit.",
          "Computed on this server for its own model: (memory − weights) / one cache of %(n)s tokens; the weights alone do not fit.", data.context_tokens)
        : ngettext("Computed on this server for its own model: (memory − weights) / one cache of %(n)s token.",
          "Computed on this server for its own model: (memory − weights) / one cache of %(n)s tokens.", data.context_tokens), { n: num(data.context_tokens) })} `
        + gettext("Activations and fragmentation are ignored, so a real server fits fewer.")));
  }
}

/** A total's hover line: its bytes, how they were computed, and whether it is past the model's context window. */
function total(r, t, capped, over) {
  const values = {
    name: rowName(r), tokens: fill(ngettext("%(n)s token", "%(n)s tokens", t.tokens), { n: num(t.tokens) }), bytes: int(t.total_bytes),
    positions: fill(ngettext("%(n)s position", "%(n)s positions", r.sliding_window - 1), { n: num(r.sliding_window - 1) }),
    count: int(t.tokens), per: int(r.bytes_per_token), window: int(r.context_window),
  };
  if (capped) {
    return fill(over ? gettext("%(name)s, %(tokens)s: %(bytes)s bytes (the sliding window keeps only the last %(positions)s' keys, so it stops growing); beyond its %(window)s-token context window")
      : gettext("%(name)s, %(tokens)s: %(bytes)s bytes (the sliding window keeps only the last %(positions)s' keys, so it stops growing)"), values);
  }
  return fill(over ? gettext("%(name)s, %(tokens)s: %(bytes)s bytes = %(count)s × %(per)s; beyond its %(window)s-token context window")
    : gettext("%(name)s, %(tokens)s: %(bytes)s bytes = %(count)s × %(per)s"), values);
}

define("he-kvcalc", HeKvcalc);
