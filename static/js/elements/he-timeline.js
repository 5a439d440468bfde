// <he-timeline>: prefill vs decode. (a) This run's own clock: the prefill pass, then every step's
// forward pass, capture and sampling; time to first token, tokens/s, time per output token.
// (b) On request, measured on this server: time to first token against prompt length, one decode
// step's latency, and the arithmetic intensity that makes decode memory-bound.
import { SteppedElement, define, el, caption, bytes, fmt } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, stats, bars, lineChart, legend, ms } from "../lib/measure.js";
import { plural } from "../lib/plural.js";

const KINDS = {
  tokenize: ["he-t-tok", "template + tokenizer"],
  prefill: ["he-t-prefill", "prefill forward pass (the prompt, less any prefix from the prefix cache)"],
  forward: ["he-t-forward", "decode forward pass (one token)"],
  capture: ["he-t-capture", "capture for the diagrams (this page's overhead)"],
  sampling: ["he-t-sampling", "sampling (processors, softmax, draw)"],
};

/** What the causal-mask check cost, and where it ran: after the first token, so it is not in the wait for it. */
function checkTitle(check) {
  if (!check) return "the causal-mask check (the mask section) runs after the first token, between decode steps: not yet in";
  if (check.reused) return "the causal-mask check: this prompt was checked lately on this model, so its result was sent without running again";
  return `check.data.measured_ms = ${check.measured_ms} ms: the causal-mask check's own passes and the decode steps between them; `
    + "it runs after the first token, so it is not part of the time to first token";
}

function prefixTitle(prefill) {
  const cache = prefill.prefix_cache;
  if (!cache) return "prefill.prefix_cache is null: this server keeps no prefix cache (EXPLAINER_PREFIX_CACHE_BYTES=0), or the run was recorded before it";
  return `prefill.cached_tokens = ${prefill.cached_tokens ?? 0}: the prompt's first tokens whose keys and values an earlier prefill on this server computed`;
}

/** The prefix cache, in words and figures: what this prefill reused, and the server's cache since it started. */
function prefixPart(prefill, line) {
  const cache = prefill?.prefix_cache;
  if (!prefill) return [caption("Waiting for the run: its prefill says how many of its tokens came from the prefix cache.")];
  if (!cache) return [caption("This server keeps no prefix cache (EXPLAINER_PREFIX_CACHE_BYTES=0), or the run was recorded before it had one: every prefill computes its whole prompt.")];
  const cached = prefill.cached_tokens ?? 0;
  const total = prefill.tokens.length;
  const said = cached
    ? `The first ${plural(cached, "token")} of the ${total} the model reads ${cached === 1 ? "was" : "were"} computed once, by an earlier prefill on this server: this prefill ran ${plural(total - cached, "token")} instead of ${total}. `
      + "A prompt shares its start with earlier ones (the template's text before your words, or a conversation's earlier turns); positions before a token never depend on it (the causal mask), so their keys and values are the same for everybody who starts that way."
    : `No prefix of this prompt was in the prefix cache, so the prefill computed all ${plural(total, "token")}; `
      + (cache.entries ? "it is kept now, and the next prompt that starts the same way computes only the rest."
        : "the cache keeps nothing (this model's cache slides or recurs, so a prefix cannot be reused, or the budget is smaller than one prompt).");
  const rate = cache.hit_rate != null ? `${fmt(cache.hit_rate * 100, 0)}%` : "–";
  const figures = stats([
    ["prefixes kept", int(cache.entries), `runs of tokens in the radix tree (as SGLang's RadixAttention keeps them)`],
    ["cache bytes", bytes(cache.bytes), `${int(cache.bytes)} of ${int(cache.budget_bytes)} bytes (EXPLAINER_PREFIX_CACHE_BYTES): keys, values and the rows the diagrams draw; least recently used go first`],
    ["hit rate", rate, `${int(cache.hits)} of ${plural(cache.lookups, "prefill")} since the server started found a cached prefix`],
    ["tokens saved", int(cache.tokens_saved), `${int(cache.tokens_saved)} of ${int(cache.tokens_looked_up)} prompt tokens since the server started came from the cache instead of a forward pass`],
  ], line);
  return [el("p", { class: "he-prefix-said" }, said), figures, line];
}

/** The measured saving on one prompt: its prefill with its cached prefix, and without. */
function savingPart(data) {
  const tokens = `${data.cached_tokens} of ${data.prompt_tokens}`;
  const line = readout("Hover or tap a tile for how it was measured.");
  const tiles = stats([
    ["prefill with the cache", ms(data.with_ms), `median of ${data.repeats} prefills of the prompt with its first ${tokens} tokens in a prefix cache (forward pass ${ms(data.with_forward_ms)})`],
    ["prefill without it", ms(data.without_ms), `median of ${data.repeats} prefills of the whole prompt (forward pass ${ms(data.without_forward_ms)})`],
    ["saved", ms(data.saved_ms), data.speedup != null ? `${fmt(data.speedup, 2)}× faster with the cache` : "–"],
  ], line);
  const said = data.cached_tokens
    ? `Measured now on this server: with ${tokens} tokens from the cache the prefill took ${ms(data.with_ms)}; computing all ${data.prompt_tokens} took ${ms(data.without_ms)}. `
      + `That is ${ms(data.saved_ms)} less before the first token.`
    : `Nothing of this prompt came from the cache, so there was nothing to save: both prefills computed all ${data.prompt_tokens} tokens (${ms(data.with_ms)} and ${ms(data.without_ms)}).`;
  return [tiles, el("p", { class: "he-prefix-saved" }, said), line];
}

class HeTimeline extends SteppedElement {
  render(rs) {
    this.measure ??= new Measure(this, "prefill_decode", { label: "Measure prefill vs decode on this server" });
    this.prefixMeasure ??= new Measure(this, "prefix", { label: "Measure what the cache saved on your prompt" });
    if (!this.runPart) {
      this.runPart = el("div", { class: "he-part" });
      this.servedPart = el("div", { class: "he-part" });
      this.prefixPart = el("div", { class: "he-part" });
      this.savingPart = el("div", { class: "he-part" });
      this.root.replaceChildren(el("h3", { class: "he-subhead" }, "Your whole run, on the clock"), this.runPart,
        el("h3", { class: "he-subhead" }, "The prefix cache"), this.prefixPart, this.prefixMeasure.node, this.savingPart,
        el("h3", { class: "he-subhead" }, "Prompt length against the wait"), this.measure.node, this.servedPart);
    }
    this.drawRun(rs);
    this.drawPrefix(rs);
    this.drawMeasured(rs);
  }

  drawRun(rs) {
    const pre = rs.prefill?.timing;
    const steps = rs.steps;
    if (!pre) { delete this.dataset.ttftMs; this.runPart.replaceChildren(caption("Waiting for the run: press Play and its prefill and steps are timed here.")); return; }
    const ttft = steps[0]?.timing?.ttft_ms;
    if (ttft != null) this.dataset.ttftMs = String(ttft); else delete this.dataset.ttftMs;
    const line = readout("Hover or tap a segment or a bar for its exact time.");
    const promptTokens = rs.prefill.tokens.length;
    const cached = rs.prefill.cached_tokens ?? 0;  // recordings made before the prefix cache read 0
    const computed = promptTokens - cached;
    this.dataset.cachedTokens = String(cached);
    const passWhat = cached ? `${plural(computed, "prompt token")} computed, ${cached} from the prefix cache` : plural(promptTokens, "prompt token");

    // Every timed phase in order, on one millisecond axis.
    const phases = [["tokenize", pre.tokenize_ms, "before the prefill"], ["prefill", pre.forward_ms, passWhat],
      ["capture", pre.capture_ms, "after the prefill"]];
    steps.forEach((s, i) => {
      const t = s.timing || {};
      if (t.forward_ms) phases.push(["forward", t.forward_ms, `step ${i + 1}`]);
      phases.push(["capture", t.capture_ms, `step ${i + 1}`], ["sampling", t.sampling_ms, `step ${i + 1}`]);
    });
    const summed = phases.reduce((a, p) => a + (p[1] || 0), 0);
    const total = rs.done?.timing?.total_ms;
    const scale = Math.max(summed, total || 0, ttft || 0) || 1;
    const bar = el("div", { class: "he-timeline" });
    let at = 0;
    for (const [kind, t, where] of phases) {
      if (!t) continue;
      const seg = el("div", { class: `he-tseg ${KINDS[kind][0]}`, style: `left:${(at / scale) * 100}%;width:${(t / scale) * 100}%` });
      hover(seg, `${KINDS[kind][1]}, ${where}: ${ms(t)} (${fmt(t)} ms), from ${fmt(at)} to ${fmt(at + t)} ms`, line);
      bar.append(seg);
      at += t;
    }
    if (ttft != null) {
      const mark = el("div", { class: "he-mark", style: `left:${(ttft / scale) * 100}%` });
      mark.append(el("span", { class: ttft / scale > 0.6 ? "he-mark-label he-left" : "he-mark-label" }, `first token ${ms(ttft)}`));
      hover(mark, `time to first token (steps[0].timing.ttft_ms): ${ttft} ms, prefill + first sampling`, line);
      bar.append(mark);
    }
    const axis = el("div", { class: "he-axis" });
    axis.append(el("span", {}, "0 ms"), el("span", {}, `${fmt(scale, 1)} ms`));
    const untimed = total != null && total > summed * 1.05 ? el("p", { class: "he-col-sub" }, `The timed phases, laid end to end, add up to ${ms(summed)} of the ${ms(total)} end to end; `
      + "the empty rest of the track is time no phase measured (sending each step to your browser, bookkeeping between steps).") : null;

    // One column per forward pass: the prefill, then each decode step.
    const cols = el("div", { class: "he-tcols" });
    const passes = [{ label: "P", parts: [["prefill", pre.forward_ms], ["capture", pre.capture_ms]], title: "prefill" }]
      .concat(steps.map((s, i) => ({ label: String(i + 1), title: `step ${i + 1} (${s.forward})`,
        parts: [["forward", s.timing?.forward_ms], ["capture", s.timing?.capture_ms], ["sampling", s.timing?.sampling_ms]] })));
    const tallest = Math.max(...passes.map((p) => p.parts.reduce((a, q) => a + (q[1] || 0), 0))) || 1;
    for (const p of passes) {
      const col = el("div", { class: "he-tcol" });
      const stack = el("div", { class: "he-stack" });
      for (const [kind, t] of p.parts) if (t) stack.append(el("div", { class: KINDS[kind][0], style: `height:${(t / tallest) * 100}%` }));
      col.append(stack, el("span", {}, p.label));
      hover(col, `${p.title}: ${p.parts.map(([k, t]) => `${k} ${ms(t)}`).join(", ")}`, line);
      cols.append(col);
    }

    const check = rs.checks?.causal_mask?.data;
    if (Number.isFinite(check?.measured_ms)) this.dataset.checkMs = String(check.measured_ms); else delete this.dataset.checkMs;
    const last = rs.lastStep?.timing;
    const d = rs.done?.timing;
    const itl = interTokenLatency(steps);
    for (const [name, v] of [["itlMedianMs", itl.median], ["itlP95Ms", itl.p95], ["e2eMs", d?.total_ms]]) {
      if (Number.isFinite(v)) this.dataset[name] = String(v); else delete this.dataset[name];
    }
    const n = rs.done?.steps ?? steps.length;
    const decodes = steps.filter((s) => s.forward === "decode").map((s) => s.timing?.forward_ms).filter(Number.isFinite).sort((a, b) => a - b);
    const median = decodes.length ? decodes[Math.floor(decodes.length / 2)] : null;
    const tiles = stats([
      ["time to first token", ms(ttft), `steps[0].timing.ttft_ms = ${ttft} ms: the prefill plus the first sampling`],
      ["prefill pass", ms(pre.forward_ms), `prefill.timing.forward_ms = ${pre.forward_ms} ms for ${plural(computed, "token")} at once`
        + (cached ? ` (the first ${cached} of ${promptTokens} came from the prefix cache: prefill.cached_tokens)` : "")],
      ["from the prefix cache", `${cached} of ${promptTokens}`, prefixTitle(rs.prefill)],
      ["decode pass (median)", ms(median), `median forward_ms of ${plural(decodes.length, "decode step")}, one token each`],
      ["time per output token", ms(d?.tpot_ms), d?.tpot_ms != null ? `done.timing.tpot_ms = (end-to-end ${fmt(d.total_ms)} − TTFT ${fmt(d.ttft_ms)}) / (${n} − 1) = ${fmt(d.tpot_ms)} ms` : "after the run ends, with at least 2 tokens"],
      ["inter-token latency", itl.median != null ? `${ms(itl.median)} · p95 ${ms(itl.p95)}` : "–",
        itl.median != null ? `ITL (vLLM's definition): the ${plural(itl.gaps, "gap")} between consecutive steps' timing.elapsed_ms, median ${fmt(itl.median)} ms, p95 ${fmt(itl.p95)} ms` : "from the second step on"],
      ["end to end", ms(d?.total_ms), d?.total_ms != null ? `done.timing.total_ms = ${d.total_ms} ms: from the start to the last token (vLLM's E2E latency)` : "after the run ends"],
      ["tokens / s", last?.tokens_per_s != null ? fmt(last.tokens_per_s, 1) : "–", `the run's last step's timing.tokens_per_s = ${last?.tokens_per_s ?? "–"}: decode tokens per second over the whole run`],
      ["causal-mask check", check?.reused ? "reused" : ms(check?.measured_ms), checkTitle(check)],
    ], line);
    this.runPart.replaceChildren(tiles, bar, axis, ...(untimed ? [untimed] : []), legend(Object.values(KINDS)),
      el("p", { class: "he-col-sub" }, "Each forward pass, prefill (P) then decode steps, on one scale:"), cols, line,
      caption(`Measured over your whole run, whatever step the page shows: the prefill read ${plural(promptTokens, "prompt token")}`
        + (cached ? ` (computing ${computed}: the first ${cached} came from the prefix cache)` : "") + ` in one pass of ${ms(pre.forward_ms)}; `
        + `${plural(steps.length, "step")} followed (step 1 samples from the prefill, so it has no forward pass of its own). `
        + (total != null ? `End to end ${ms(total)}. ` : "") + "Capture is what this page adds to draw the diagrams; a production server skips it."));
  }

  drawPrefix(rs) {
    this.prefixPart.replaceChildren(...prefixPart(rs.prefill, readout("Hover or tap a tile for what it counts.")));
    const state = this.prefixMeasure.sync(rs);
    if (state.data) this.dataset.prefixSavedMs = String(state.data.saved_ms); else delete this.dataset.prefixSavedMs;
    this.savingPart.replaceChildren(...(state.data ? savingPart(state.data) : [this.prefixMeasure.placeholder(state,
      "Press the button to time your prompt's prefill twice on this server: from the prefix its own prefill found in the cache, and from nothing.")]));
  }

  drawMeasured(rs) {
    const state = this.measure.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.lengths;
      delete this.dataset.prefillInDecodeSteps;
      this.servedPart.replaceChildren(this.measure.placeholder(state,
        "Press the button to time a prefill at several prompt lengths, each followed by one decode step, on this server's model (random tokens)."));
      return;
    }
    const rows = data.rows;
    this.dataset.lengths = rows.map((r) => r.prompt_tokens).join(",");
    this.dataset.prefillInDecodeSteps = String(rows[rows.length - 1].prefill_ms / rows[rows.length - 1].decode_ms);
    const line = readout("Hover or tap a point or a bar for its value.");
    const chart = lineChart([
      { name: "prefill", cls: "he-c-prefill", points: rows.map((r) => ({ x: r.prompt_tokens, y: r.prefill_ms,
        title: `prefill of ${plural(r.prompt_tokens, "token")}: ${r.prefill_ms} ms (${fmt(data.prefill_tokens_per_s[r.prompt_tokens], 1)} tokens/s)` })) },
      { name: "decode", cls: "he-c-decode", points: rows.map((r) => ({ x: r.prompt_tokens, y: r.decode_ms,
        title: `one decode step after ${plural(r.prompt_tokens, "token")}: ${r.decode_ms} ms` })) },
    ], { xLabel: "prompt tokens", yLabel: "ms", line });
    const longest = rows[rows.length - 1];
    const intensity = [{ label: "decode, 1 token", value: data.decode_intensity, text: fmt(data.decode_intensity, 2), cls: "he-t-forward",
      title: `decode: ${int(data.flops_per_token)} FLOPs per token / ${int(data.weight_bytes)} bytes of weights read = ${data.decode_intensity} FLOPs per byte` }]
      .concat(Object.entries(data.prefill_intensity).map(([p, v]) => ({ label: `prefill, ${plural(p, "token")}`, value: v, text: fmt(v, 1), cls: "he-t-prefill",
        title: `prefill of ${plural(p, "token")}: ${p} × ${int(data.flops_per_token)} FLOPs / ${int(data.weight_bytes)} bytes = ${v} FLOPs per byte` })));
    this.servedPart.replaceChildren(
      chart, legend([["he-t-prefill", "prefill (time to first token)"], ["he-t-forward", "one decode step"]]),
      stats([
        ["decode tokens / s", fmt(data.decode_tokens_per_s, 1), `1000 / decode_ms of the last row = ${data.decode_tokens_per_s}`],
        [`prefill tokens / s (${longest.prompt_tokens})`, fmt(data.prefill_tokens_per_s[longest.prompt_tokens], 1), `${plural(longest.prompt_tokens, "token")} / ${longest.prefill_ms} ms`],
        ["weights read per pass", bytes(data.weight_bytes), `${int(data.weight_bytes)} bytes: ${plural(data.parameters, "parameter")}`],
        [`one ${longest.prompt_tokens}-token prefill stalls`, `${fmt(longest.prefill_ms / longest.decode_ms, 1)} decode steps`,
          `${longest.prefill_ms} ms prefill / ${longest.decode_ms} ms per decode step: how long a reply streaming beside it waits, unless the phases are disaggregated`, "he-stall"],
      ], line),
      el("p", { class: "he-col-sub" }, "Arithmetic intensity: FLOPs done per byte of weights read (2 × parameters per token):"),
      bars(intensity, line),
      el("p", {}, `A decode step does about ${fmt(data.decode_intensity, 2)} floating-point operations per byte of weights it reads: every weight is fetched from memory `
        + `to produce a single token. A prefill of ${plural(longest.prompt_tokens, "token")} reuses each fetched weight ${plural(longest.prompt_tokens, "time")} (${fmt(data.prefill_intensity[longest.prompt_tokens], 1)} per byte). `
        + "Processors can do far more arithmetic per byte than decode asks of them, so decode spends its time waiting on memory: it is memory-bound, and prefill is compute-bound."),
      line,
      caption(`Measured on this server's model: for each prompt length, one timed prefill over random tokens and then one decode step (after a warm-up pass). `
        + "Intensity is computed from the model's size, not timed."));
  }
}

/** vLLM's ITL over one run: the gaps between consecutive steps' server times; median and p95 (nearest rank). */
function interTokenLatency(steps) {
  const times = steps.map((s) => s.timing?.elapsed_ms).filter(Number.isFinite);
  const gaps = times.slice(1).map((t, i) => t - times[i]).sort((a, b) => a - b);
  const rank = (q) => gaps[Math.min(gaps.length - 1, Math.ceil(q * gaps.length) - 1)];
  return gaps.length ? { gaps: gaps.length, median: rank(0.5), p95: rank(0.95) } : { gaps: 0, median: null, p95: null };
}

define("he-timeline", HeTimeline);
