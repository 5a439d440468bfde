// <he-context>: the context window vs the KV cache: positions used by the prompt and the reply, the
// free rest, and the cache that speeds decoding inside the window without enlarging it.
import { SteppedElement, define, el, caption, bytes } from "../lib/base-element.js";
import { readout, hover, pct, int } from "../lib/widgets.js";
import { fill, gettext, grouped, ngettext, sentences } from "../lib/i18n.js";

/** "%(n)s position(s)" for `n`, in the reader's language. */
const positions = (n) => fill(ngettext("%(n)s position", "%(n)s positions", n), { n: grouped(n) });

class HeContext extends SteppedElement {
  render(rs) {
    const n = this.step(rs.steps.length);  // the page's step: the window as it stood after step n
    const kv = n ? rs.steps[n - 1].kv : rs.prefill?.kv;
    const W = kv?.context_window ?? rs.session?.model?.context_window;
    if (W == null) { delete this.dataset.contextWindow; this.root.replaceChildren(caption(gettext("Waiting for the run."))); return; }
    this.dataset.contextWindow = String(W);
    const P = rs.prefill?.tokens?.length ?? 0;
    const free = Math.max(0, W - P - n);
    const line = readout(gettext("Hover or tap a part of the window for its size."));

    const barNode = el("div", { class: "he-ctx" });
    const parts = [["he-ctx-prompt", P, gettext("prompt: %(positions)s (%(share)s of %(window)s)")],
      ["he-ctx-gen", n, gettext("generated: %(positions)s (%(share)s of %(window)s)")], ["he-ctx-free", free, gettext("free: %(positions)s (%(share)s of %(window)s)")]];
    for (const [cls, count, text] of parts) {
      if (!count) continue;
      const seg = el("div", { class: `he-ctx-seg ${cls}`, style: `flex-grow:${count}` });
      hover(seg, fill(text, { positions: positions(count), share: pct(count / W), window: int(W) }), line);
      barNode.append(seg);
    }
    // The cache, on the same scale: it covers positions already read, inside the window.
    const cacheBar = el("div", { class: "he-ctx he-ctx-cache" });
    if (kv) {
      const held = el("div", { class: "he-ctx-seg he-ctx-kv", style: `flex-grow:${kv.seq_len}` });
      held.append(el("span", { class: "he-ctx-word" }, "KV")); // hidden when the sliver is too thin for it (elements.css)
      hover(held, fill(gettext("KV cache: positions 0–%(last)s (%(count)s), %(bytes)s bytes"), { last: kv.seq_len - 1, count: int(kv.seq_len), bytes: int(kv.bytes) }), line);
      cacheBar.append(held, el("div", { class: "he-ctx-seg he-ctx-none", style: `flex-grow:${Math.max(0, W - kv.seq_len)}` }));
    }
    const axis = el("div", { class: "he-axis" });
    axis.append(el("span", {}, fill(gettext("position %(n)s"), { n: 0 })), el("span", {}, `${int(W - 1)}`));
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "he-key he-ctx-prompt" }), ` ${fill(gettext("prompt %(n)s"), { n: int(P) })}  `,
      el("span", { class: "he-key he-ctx-gen" }), ` ${fill(gettext("generated %(n)s"), { n: int(n) })}  `,
      el("span", { class: "he-key he-ctx-free" }), ` ${fill(gettext("free %(n)s"), { n: int(free) })}  `,
      el("span", { class: "he-key he-ctx-kv" }), ` ${fill(gettext("KV cache %(n)s"), { n: int(kv?.seq_len ?? 0) })}`);

    // Every payload so far reports the window; the cache never changes it.
    const windows = new Set([rs.prefill?.kv?.context_window, ...rs.steps.map((s) => s.kv.context_window)].filter((x) => x != null));
    const reports = (rs.prefill ? 1 : 0) + rs.steps.length;  // the whole run's payloads, not only those up to step n
    this.dataset.positionsUsed = String(P + n);
    if (kv) Object.assign(this.dataset, { kvPositions: String(kv.seq_len), kvBytes: String(kv.bytes) });
    else { delete this.dataset.kvPositions; delete this.dataset.kvBytes; }
    const sliding = rs.session?.model?.sliding_window;
    const cache = el("div", { class: "he-gqa" });
    if (kv) {
      const now = n ? fill(gettext("KV cache after step %(step)s: %(positions)s, %(size)s (%(bytes)s bytes)."), { step: n, positions: positions(kv.seq_len), size: bytes(kv.bytes), bytes: int(kv.bytes) })
        : fill(gettext("KV cache after the prefill: %(positions)s, %(size)s (%(bytes)s bytes)."), { positions: positions(kv.seq_len), size: bytes(kv.bytes), bytes: int(kv.bytes) });
      cache.append(el("p", { class: "he-kv-now" }, sentences([now,
        gettext("It keeps the keys and values of positions already read, so each step runs the model on one new position instead of the whole sequence: it speeds decoding inside the window."),
        fill(ngettext("It does not enlarge the window: a model cannot attend to more than %(n)s position, cached or not.",
          "It does not enlarge the window: a model cannot attend to more than %(n)s positions, cached or not.", W), { n: grouped(W) })])));
      hover(cache, `kv.seq_len = ${kv.seq_len}, kv.bytes = ${kv.bytes}, kv.context_window = ${kv.context_window}`, line, false);
    }
    cache.append(el("p", { class: "he-col-sub" }, windows.size === 1
      ? fill(ngettext("Whole run: all %(reports)s payloads report the same window, %(n)s position, while the cache grew.",
        "Whole run: all %(reports)s payloads report the same window, %(n)s positions, while the cache grew.", W), { reports: int(reports), n: grouped(W) })
      : fill(gettext("Whole run: the payloads report different windows: %(windows)s."), { windows: [...windows].join(", ") })));
    if (sliding) {
      cache.append(el("p", { class: "he-col-sub" }, fill(ngettext("Some layers also use a sliding window: they attend only to the last %(n)s position.",
        "Some layers also use a sliding window: they attend only to the last %(n)s positions.", sliding), { n: grouped(sliding) })));
    }

    const used = fill(ngettext("%(used)s of %(n)s position used", "%(used)s of %(n)s positions used", W), { used: int(P + n), n: grouped(W) });
    this.root.replaceChildren(el("p", { class: "he-big" }, used), barNode, cacheBar, axis, legend, cache, line, caption(summary(rs, W, P, n, free)));
  }
}

/** The caption: the window, what the prompt and the reply took of it, and where the run stops. */
function summary(rs, W, P, n, free) {
  const model = rs.session?.model?.name;
  const ctx = model
    ? fill(ngettext("This run's %(model)s has a context window of %(n)s position.", "This run's %(model)s has a context window of %(n)s positions.", W), { model, n: grouped(W) })
    : fill(ngettext("This run's model has a context window of %(n)s position.", "This run's model has a context window of %(n)s positions.", W), { n: grouped(W) });
  const took = n
    ? ngettext("The prompt took %(prompt)s; after step %(step)s, %(n)s token was generated and %(free)s remain.",
      "The prompt took %(prompt)s; after step %(step)s, %(n)s tokens were generated and %(free)s remain.", n)
    : gettext("The prompt took %(prompt)s; after the prefill, %(n)s tokens were generated and %(free)s remain.");
  return sentences([ctx, fill(took, { prompt: int(P), step: n, n: int(n), free: int(free) }),
    fill(gettext("The run ends with stop reason context_window if the sequence reaches %(window)s."), { window: int(W) })]);
}

define("he-context", HeContext);
