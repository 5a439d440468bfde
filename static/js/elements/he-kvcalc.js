// <he-kvcalc>: how big the KV cache gets. On request, the server computes bytes per token for its
// own model and real configs (OPT-13B, Llama-2-7B, Llama-3-8B, Mistral-7B, Qwen2.5-7B-1M) with the
// formula per row, beside the bytes this run's cache actually held; and a capacity calculator.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, stats } from "../lib/measure.js";
import { roving } from "../lib/pointer.js";
import { plural } from "../lib/plural.js";

const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2, int8: 1, fp8: 1, float64: 8 };
const GIB = 1024 ** 3;

class HeKvcalc extends SteppedElement {
  render(rs) {
    this.measure ??= new Measure(this, "kv", { label: "Measure on this server" });
    this.capacity ??= new Measure(this, "capacity", { label: "How many fit?", fields: ["memory_bytes", "context_tokens"], extra: () => this.capacityFields() });
    if (!this.tablePart) {
      this.tablePart = el("div", { class: "he-part" });
      this.capPart = el("div", { class: "he-part" });
      this.memory = el("input", { type: "number", min: "0.001", step: "any", value: "80", name: "memory_gib", inputmode: "decimal" });
      this.context = el("input", { type: "number", min: "1", step: "1", value: "2048", name: "context_tokens", inputmode: "numeric" });
      const form = el("div", { class: "he-form" });
      const lab = (text, input) => { const l = el("label", {}); l.append(el("span", {}, text), input); return l; };
      form.append(lab("memory (GiB)", this.memory), lab("context per visitor (tokens)", this.context), this.capacity.node);
      this.root.replaceChildren(this.measure.node, this.tablePart, el("h3", { class: "he-subhead" }, "How many visitors fit?"), form, this.capPart);
    }
    this.drawTable(rs);
    this.drawCapacity(rs);
  }

  capacityFields() {
    const gib = Number(this.memory.value), tokens = Math.trunc(Number(this.context.value));
    if (!(gib > 0) || !(tokens >= 1)) { this.capacity.status.textContent = "enter a memory above 0 GiB and at least 1 token"; return null; }
    return { memory_bytes: Math.round(gib * GIB), context_tokens: tokens };
  }

  drawTable(rs) {
    const state = this.measure.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.optBytesPerToken;
      this.tablePart.replaceChildren(this.measure.placeholder(state,
        "Press the button: the server computes the cache size of its own model and of five published models from their configs."));
      return;
    }
    const opt = data.rows.find((r) => r.key === "opt-13b");
    if (opt) this.dataset.optBytesPerToken = String(opt.bytes_per_token); else delete this.dataset.optBytesPerToken;
    const line = readout("Hover or tap a cell for its formula and exact bytes.");
    const table = el("table", { class: "he-table he-kvtable" });
    const head = el("tr");
    for (const h of ["model", "bytes per token", "formula", "query / KV heads", ...data.tokens.filter((n) => n > 1).map((n) => plural(n, "token"))]) head.append(el("th", { scope: "col" }, h));
    const thead = el("thead");
    thead.append(head);
    table.append(thead);
    const body = el("tbody");
    for (const r of data.rows) {
      const tr = el("tr", { class: r.key === "opt-13b" ? "he-hl" : r.key === "loaded" ? "he-ours" : null, "data-key": r.key });
      const name = el("th", { scope: "row" });
      name.append(el("span", {}, r.name));
      if (r.sliding_window) name.append(el("small", {}, ` sliding window ${int(r.sliding_window)}`));
      hover(name, `${r.name}: ${r.source ?? "this server's loaded config"}`, line);
      const gqa = r.query_heads && r.kv_heads && r.query_heads > r.kv_heads;
      const heads = el("td", {}, `${r.query_heads ?? "?"} / ${r.kv_heads}${gqa ? " GQA" : ""}`);
      hover(heads, gqa ? `grouped-query attention: ${plural(r.query_heads, "query head")} share ${plural(r.kv_heads, "KV head")}; the cache stores only the KV heads, ${r.query_heads / r.kv_heads}× less`
        : `${plural(r.query_heads, "query head")}, one KV head each: no sharing`, line);
      const per = el("td", { class: `he-num${r.key === "opt-13b" ? " he-keycell" : ""}` }, int(r.bytes_per_token));
      hover(per, `${r.formula} (${bytes(r.bytes_per_token)})`, line);
      const bpe = DTYPE_BYTES[data.dtype];
      const formula = el("td", {}, `2 × ${r.layers} × ${r.kv_heads} × ${r.head_dim} × ${bpe ?? "?"}`);
      hover(formula, `${r.name}: ${r.formula}`, line);
      tr.append(name, per, formula, heads);
      for (const t of r.totals.filter((x) => x.tokens > 1)) { // 1 token is the bytes-per-token column
        const over = r.context_window && t.tokens > r.context_window;
        const capped = r.sliding_window && t.tokens >= r.sliding_window;
        const key = r.key === "opt-13b" && t.tokens === 2048;
        const td = el("td", { class: `he-num${over ? " he-over" : ""}${key ? " he-keycell" : ""}` }, bytes(t.total_bytes));
        hover(td, `${r.name}, ${plural(t.tokens, "token")}: ${int(t.total_bytes)} bytes`
          + (capped ? ` (the sliding window keeps only the last ${plural(r.sliding_window - 1, "position")}' keys, so it stops growing)` : ` = ${int(t.tokens)} × ${int(r.bytes_per_token)}`)
          + (over ? `; beyond its ${int(r.context_window)}-token context window` : ""), line);
        tr.append(td);
      }
      body.append(tr);
    }
    table.append(body);
    // One tab stop for the table's values: Left/Right along a model's row, Up/Down between models.
    roving(body.querySelectorAll("th, td"), { columns: body.rows[0]?.cells.length ?? 0 });
    const scroll = el("div", { class: "he-scroll capped he-wide-table", tabindex: "0", role: "region", "aria-label": "KV cache sizes (scrollable)" });
    scroll.append(table);

    const parts = [el("p", { class: "he-scroll-hint" }, "Scroll the table sideways for every column."), scroll, el("p", { class: "he-col-sub" }, `Formula: ${data.formula}, in ${data.dtype} (${DTYPE_BYTES[data.dtype] ?? "?"} bytes per element). Greyed totals exceed the model's context window.`)];
    if (opt) {
      const at2048 = opt.totals.find((t) => t.tokens === 2048);
      parts.push(el("p", { class: "he-callout" }, `OPT-13B: ${int(opt.bytes_per_token)} bytes per token = ${bytes(opt.bytes_per_token)}, the vLLM paper's "800 KB"`
        + (at2048 ? `; one 2,048-token request holds ${int(at2048.total_bytes)} bytes = ${bytes(at2048.total_bytes)}, its "up to 1.6 GB".` : ".")));
    }
    parts.push(this.liveCache(rs, data, line), line,
      caption("Computed on this server from each model's config (the layer count, KV heads and head size it declares); "
        + "your run's own cache is measured from its tensors."));
    this.tablePart.replaceChildren(...parts);
  }

  /** The formula for this server's model beside the bytes the run's cache actually held. */
  liveCache(rs, data, line) {
    const ours = data.rows.find((r) => r.key === "loaded");
    const n = this.step(rs.steps.length);  // the cache as it stood after the page's step, not the run's last
    const kv = n ? rs.steps[n - 1].kv : rs.prefill?.kv;
    if (!ours) return el("p", {});
    if (!kv) return el("p", { class: "he-col-sub" }, "Run a prompt to see your run's cache measured beside this server's row.");
    const size = DTYPE_BYTES[kv.dtype], tableSize = DTYPE_BYTES[data.dtype];
    const predicted = size && tableSize ? (ours.bytes_per_token / tableSize) * size * kv.stored_tokens : null;
    const node = stats([
      [n ? `your cache after step ${n}` : "your cache after the prefill", bytes(kv.bytes), `step ${n}'s kv.bytes = ${int(kv.bytes)} bytes (every cached key and value tensor)`],
      ["positions", int(kv.seq_len), `kv.seq_len = ${kv.seq_len}`],
      ["measured per token", `${int(kv.bytes_per_token)} B`, `kv.bytes_per_token = ${int(kv.bytes)} / ${plural(kv.stored_tokens, "stored position")}`],
      ["formula, in " + (kv.dtype ?? "?"), predicted != null ? `${int(predicted)} B${predicted === kv.bytes ? " = measured" : ""}` : "–",
        predicted != null ? `${int(ours.bytes_per_token)} B/token in ${data.dtype} × ${size}/${tableSize} bytes per element (${kv.dtype}) × ${plural(kv.stored_tokens, "position")} = ${int(predicted)} bytes`
          + (predicted === kv.bytes ? ": equal to the measured cache" : `: the measured cache holds ${int(kv.bytes)}`) : "unknown dtype"],
    ], line);
    const wrap = el("div", { class: "he-live" });
    Object.assign(wrap.dataset, { kvBytes: String(kv.bytes), kvPositions: String(kv.seq_len), step: String(n) });
    wrap.append(el("p", { class: "he-col-sub" }, `This server's row, checked against your run's cache (${kv.dtype ?? "unknown dtype"}, the table assumes ${data.dtype}):`), node);
    return wrap;
  }

  drawCapacity(rs) {
    const state = this.capacity.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.visitors;
      this.capPart.replaceChildren(this.capacity.placeholder(state, "Pick a memory size and a context length; the server divides what is left after its weights by one visitor's cache."));
      return;
    }
    this.dataset.visitors = String(data.visitors);
    const line = readout("Hover or tap a number for how it was computed.");
    const free = data.memory_bytes - data.weight_bytes;
    this.capPart.replaceChildren(
      el("p", { class: "he-big he-visitors" }, plural(data.visitors, "visitor's cache fits", "visitors' caches fit")),
      stats([
        ["memory", bytes(data.memory_bytes), `${int(data.memory_bytes)} bytes`],
        ["weights", bytes(data.weight_bytes), `${int(data.weight_bytes)} bytes of this server's weights, loaded once for everyone`],
        ["one visitor's cache", bytes(data.kv_bytes_per_visitor), `${plural(data.context_tokens, "token")} in ${data.dtype}: ${int(data.kv_bytes_per_visitor)} bytes`],
        ["visitors", int(data.visitors), `floor((${int(data.memory_bytes)} − ${int(data.weight_bytes)}) / ${int(data.kv_bytes_per_visitor)}) = ${int(data.visitors)}`],
      ], line),
      line,
      caption(`Computed on this server for its own model: (memory − weights) / one cache of ${plural(data.context_tokens, "token")}`
        + `${free < 0 ? "; the weights alone do not fit" : ""}. Activations and fragmentation are ignored, so a real server fits fewer.`));
  }
}

define("he-kvcalc", HeKvcalc);
