// <he-context>: the context window vs the KV cache: positions used by the prompt and the reply, the
// free rest, and the cache that speeds decoding inside the window without enlarging it.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { readout, hover, pct, int } from "../lib/widgets.js";
import { plural } from "../lib/plural.js";

class HeContext extends SteppedElement {
  render(rs) {
    const n = this.step(rs.steps.length);  // the page's step: the window as it stood after step n
    const kv = n ? rs.steps[n - 1].kv : rs.prefill?.kv;
    const W = kv?.context_window ?? rs.session?.model?.context_window;
    if (W == null) { delete this.dataset.contextWindow; this.root.replaceChildren(caption("Waiting for the run.")); return; }
    this.dataset.contextWindow = String(W);
    const P = rs.prefill?.tokens?.length ?? 0;
    const free = Math.max(0, W - P - n);
    const line = readout("Hover or tap a part of the window for its size.");

    const barNode = el("div", { class: "he-ctx" });
    for (const [cls, count, label] of [["he-ctx-prompt", P, "prompt"], ["he-ctx-gen", n, "generated"], ["he-ctx-free", free, "free"]]) {
      if (!count) continue;
      const seg = el("div", { class: `he-ctx-seg ${cls}`, style: `flex-grow:${count}` });
      hover(seg, `${label}: ${plural(count, "position")} (${pct(count / W)} of ${int(W)})`, line);
      barNode.append(seg);
    }
    // The cache, on the same scale: it covers positions already read, inside the window.
    const cacheBar = el("div", { class: "he-ctx he-ctx-cache" });
    if (kv) {
      const held = el("div", { class: "he-ctx-seg he-ctx-kv", style: `flex-grow:${kv.seq_len}` });
      held.append(el("span", { class: "he-ctx-word" }, "KV")); // hidden when the sliver is too thin for it (elements.css)
      hover(held, `KV cache: positions 0–${kv.seq_len - 1} (${int(kv.seq_len)}), ${int(kv.bytes)} bytes`, line);
      cacheBar.append(held, el("div", { class: "he-ctx-seg he-ctx-none", style: `flex-grow:${Math.max(0, W - kv.seq_len)}` }));
    }
    const axis = el("div", { class: "he-axis" });
    axis.append(el("span", {}, "position 0"), el("span", {}, `${int(W - 1)}`));
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "he-key he-ctx-prompt" }), ` prompt ${int(P)}  `,
      el("span", { class: "he-key he-ctx-gen" }), ` generated ${int(n)}  `,
      el("span", { class: "he-key he-ctx-free" }), ` free ${int(free)}  `,
      el("span", { class: "he-key he-ctx-kv" }), ` KV cache ${int(kv?.seq_len ?? 0)}`);

    // Every payload so far reports the window; the cache never changes it.
    const windows = new Set([rs.prefill?.kv?.context_window, ...rs.steps.map((s) => s.kv.context_window)].filter((x) => x != null));
    const reports = (rs.prefill ? 1 : 0) + rs.steps.length;  // the whole run's payloads, not only those up to step n
    this.dataset.positionsUsed = String(P + n);
    if (kv) Object.assign(this.dataset, { kvPositions: String(kv.seq_len), kvBytes: String(kv.bytes) });
    else { delete this.dataset.kvPositions; delete this.dataset.kvBytes; }
    const sliding = rs.session?.model?.sliding_window;
    const cache = el("div", { class: "he-gqa" });
    if (kv) {
      cache.append(el("p", { class: "he-kv-now" }, `KV cache ${n ? `after step ${n}` : "after the prefill"}: ${plural(kv.seq_len, "position")}, ${bytes(kv.bytes)} (${int(kv.bytes)} bytes). `
        + "It keeps the keys and values of positions already read, so each step runs the model on one new position instead of the whole sequence: "
        + "it speeds decoding inside the window. It does not enlarge the window: a model cannot attend to more than "
        + `${plural(W, "position")}, cached or not.`));
      hover(cache, `kv.seq_len = ${kv.seq_len}, kv.bytes = ${kv.bytes}, kv.context_window = ${kv.context_window}`, line, false);
    }
    cache.append(el("p", { class: "he-col-sub" }, windows.size === 1
      ? `Whole run: all ${int(reports)} payloads report the same window, ${plural(W, "position")}, while the cache grew.`
      : `Whole run: the payloads report different windows: ${[...windows].join(", ")}.`));
    if (sliding) cache.append(el("p", { class: "he-col-sub" }, `Some layers also use a sliding window: they attend only to the last ${plural(sliding, "position")}.`));

    this.root.replaceChildren(el("p", { class: "he-big" }, `${int(P + n)} of ${plural(W, "position")} used`), barNode, cacheBar, axis, legend, cache, line,
      caption(`This run's ${rs.session?.model?.name ?? "model"} has a context window of ${plural(W, "position")}. `
        + `The prompt took ${int(P)}; ${n ? `after step ${n}` : "after the prefill"}, ${int(n)} token${n === 1 ? " was" : "s were"} generated and ${int(free)} remain. `
        + `The run ends with stop reason context_window if the sequence reaches ${int(W)}.`));
  }
}

define("he-context", HeContext);
