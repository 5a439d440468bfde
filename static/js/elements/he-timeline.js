// <he-timeline>: prefill vs decode. (a) This run's own clock: the prefill pass, then every step's
// forward pass, capture and sampling; time to first token, tokens/s, time per output token.
// (b) On request, measured on this server: time to first token against prompt length, one decode
// step's latency, and the arithmetic intensity that makes decode memory-bound.
import { SteppedElement, define, el, caption, bytes, fmt } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, stats, bars, lineChart, legend, ms } from "../lib/measure.js";
import { fill, gettext, gettext_noop, grouped, ngettext, sentences } from "../lib/i18n.js";

const KINDS = {
  tokenize: ["he-t-tok", gettext_noop("template + tokenizer")],
  prefill: ["he-t-prefill", gettext_noop("prefill forward pass (the prompt, less any prefix from the prefix cache)")],
  forward: ["he-t-forward", gettext_noop("decode forward pass (one token)")],
  capture: ["he-t-capture", gettext_noop("capture for the diagrams (this page's overhead)")],
  sampling: ["he-t-sampling", gettext_noop("sampling (processors, softmax, draw)")],
};
/** The short names of a forward pass's parts, in its column's hover line. */
const PARTS = { prefill: gettext_noop("prefill"), forward: gettext_noop("forward"), capture: gettext_noop("capture"), sampling: gettext_noop("sampling") };

/** `n` and its noun in the reader's language, from an ngettext pair: "1 token", "2 tokens" ("– tokens" if unknown). */
const count = (n, text) => fill(text, { n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });
const tokens = (n) => count(n, ngettext("%(n)s token", "%(n)s tokens", n));
const promptTokens = (n) => count(n, ngettext("%(n)s prompt token", "%(n)s prompt tokens", n));

/** What the causal-mask check cost, and where it ran: after the first token, so it is not in the wait for it. */
function checkTitle(check) {
  if (!check) return gettext("the causal-mask check (the mask section) runs after the first token, between decode steps: not yet in");
  if (check.reused) return gettext("the causal-mask check: this prompt was checked lately on this model, so its result was sent without running again");
  return fill(gettext("check.data.measured_ms = %(ms)s ms: the causal-mask check's own passes and the decode steps between them; "
    + "it runs after the first token, so it is not part of the time to first token"), { ms: String(check.measured_ms) });
}

function prefixTitle(prefill) {
  const cache = prefill.prefix_cache;
  if (!cache) return gettext("prefill.prefix_cache is null: this server keeps no prefix cache (EXPLAINER_PREFIX_CACHE_BYTES=0), or the run was recorded before it");
  return fill(gettext("prefill.cached_tokens = %(n)s: the prompt's first tokens whose keys and values an earlier prefill on this server computed"), { n: prefill.cached_tokens ?? 0 });
}

/** The prefix cache, in words and figures: what this prefill reused, and the server's cache since it started. */
function prefixPart(prefill, line) {
  const cache = prefill?.prefix_cache;
  if (!prefill) return [caption(gettext("Waiting for the run: its prefill says how many of its tokens came from the prefix cache."))];
  if (!cache) return [caption(gettext("This server keeps no prefix cache (EXPLAINER_PREFIX_CACHE_BYTES=0), or the run was recorded before it had one: every prefill computes its whole prompt."))];
  const cached = prefill.cached_tokens ?? 0;
  const total = prefill.tokens.length;
  const said = cached
    ? `${fill(ngettext("The first %(n)s token of the %(total)s the model reads was computed once, by an earlier prefill on this server: this prefill ran %(ran)s instead of %(total)s.",
      "The first %(n)s tokens of the %(total)s the model reads were computed once, by an earlier prefill on this server: this prefill ran %(ran)s instead of %(total)s.", cached),
    { n: grouped(cached), total, ran: tokens(total - cached) })} `
      + gettext("A prompt shares its start with earlier ones (the template's text before your words, or a conversation's earlier turns); positions before a token never depend on it (the causal mask), so their keys and values are the same for everybody who starts that way.")
    : `${fill(gettext("No prefix of this prompt was in the prefix cache, so the prefill computed all %(tokens)s;"), { tokens: tokens(total) })} `
      + (cache.entries ? gettext("it is kept now, and the next prompt that starts the same way computes only the rest.")
        : gettext("the cache keeps nothing (this model's cache slides or recurs, so a prefix cannot be reused, or the budget is smaller than one prompt)."));
  const rate = cache.hit_rate != null ? `${fmt(cache.hit_rate * 100, 0)}%` : "–";
  const figures = stats([
    [gettext("prefixes kept"), int(cache.entries), gettext("runs of tokens in the radix tree (as SGLang's RadixAttention keeps them)")],
    [gettext("cache bytes"), bytes(cache.bytes), fill(gettext("%(bytes)s of %(budget)s bytes (EXPLAINER_PREFIX_CACHE_BYTES): keys, values and the rows the diagrams draw; least recently used go first"),
      { bytes: int(cache.bytes), budget: int(cache.budget_bytes) })],
    [gettext("hit rate"), rate, fill(gettext("%(hits)s of %(prefills)s since the server started found a cached prefix"),
      { hits: int(cache.hits), prefills: count(cache.lookups, ngettext("%(n)s prefill", "%(n)s prefills", cache.lookups)) })],
    [gettext("tokens saved"), int(cache.tokens_saved), fill(gettext("%(saved)s of %(looked)s prompt tokens since the server started came from the cache instead of a forward pass"),
      { saved: int(cache.tokens_saved), looked: int(cache.tokens_looked_up) })],
  ], line);
  return [el("p", { class: "he-prefix-said" }, said), figures, line];
}

/** The measured saving on one prompt: its prefill with its cached prefix, and without. */
function savingPart(data) {
  const values = { cached: String(data.cached_tokens), total: String(data.prompt_tokens), repeats: String(data.repeats), with: ms(data.with_ms),
    without: ms(data.without_ms), withForward: ms(data.with_forward_ms), withoutForward: ms(data.without_forward_ms), saved: ms(data.saved_ms) };
  const line = readout(gettext("Hover or tap a tile for how it was measured."));
  const tiles = stats([
    [gettext("prefill with the cache"), ms(data.with_ms),
      fill(gettext("median of %(repeats)s prefills of the prompt with its first %(cached)s of %(total)s tokens in a prefix cache (forward pass %(withForward)s)"), values)],
    [gettext("prefill without it"), ms(data.without_ms), fill(gettext("median of %(repeats)s prefills of the whole prompt (forward pass %(withoutForward)s)"), values)],
    [gettext("saved"), ms(data.saved_ms), data.speedup != null ? fill(gettext("%(speedup)s× faster with the cache"), { speedup: fmt(data.speedup, 2) }) : "–"],
  ], line);
  const said = data.cached_tokens
    ? `${fill(gettext("Measured now on this server: with %(cached)s of %(total)s tokens from the cache the prefill took %(with)s; computing all %(total)s took %(without)s."), values)} `
      + fill(gettext("That is %(saved)s less before the first token."), values)
    : fill(gettext("Nothing of this prompt came from the cache, so there was nothing to save: both prefills computed all %(total)s tokens (%(with)s and %(without)s)."), values);
  return [tiles, el("p", { class: "he-prefix-saved" }, said), line];
}

class HeTimeline extends SteppedElement {
  render(rs) {
    this.measure ??= new Measure(this, "prefill_decode", { label: gettext("Measure prefill vs decode on this server") });
    this.prefixMeasure ??= new Measure(this, "prefix", { label: gettext("Measure what the cache saved on your prompt") });
    if (this.dataset.run === "b") { this.renderRunOnly(rs); return; }
    if (!this.runPart) {
      this.runPart = el("div", { class: "he-part" });
      this.servedPart = el("div", { class: "he-part" });
      this.prefixPart = el("div", { class: "he-part" });
      this.savingPart = el("div", { class: "he-part" });
      this.root.replaceChildren(el("h3", { class: "he-subhead" }, gettext("Your whole run, on the clock")), this.runPart,
        el("h3", { class: "he-subhead" }, gettext("The prefix cache")), this.prefixPart, this.prefixMeasure.node, this.savingPart,
        el("h3", { class: "he-subhead" }, gettext("Prompt length against the wait")), this.measure.node, this.servedPart);
    }
    this.drawRun(rs);
    this.drawPrefix(rs);
    this.drawMeasured(rs);
  }

  /** Run B of a compare run (issue 29): its own clock only; the prefix cache and the server's measurements are the
   * server's, drawn once beside run A (run B's int8 copy has no prefix cache of its own). */
  renderRunOnly(rs) {
    if (!this.runPart) {
      this.runPart = el("div", { class: "he-part" });
      this.root.replaceChildren(el("h3", { class: "he-subhead" }, gettext("Your whole run, on the clock")), this.runPart,
        caption(gettext("The prefix cache and the server's measurements are the server's, not this run's: they are drawn beside run A.")));
    }
    this.drawRun(rs);
  }

  drawRun(rs) {
    const pre = rs.prefill?.timing;
    const steps = rs.steps;
    if (!pre) { delete this.dataset.ttftMs; this.runPart.replaceChildren(caption(gettext("Waiting for the run: press Play and its prefill and steps are timed here."))); return; }
    const ttft = steps[0]?.timing?.ttft_ms;
    if (ttft != null) this.dataset.ttftMs = String(ttft); else delete this.dataset.ttftMs;
    const line = readout(gettext("Hover or tap a segment or a bar for its exact time."));
    const promptCount = rs.prefill.tokens.length;
    const cached = rs.prefill.cached_tokens ?? 0;  // recordings made before the prefix cache read 0
    const computed = promptCount - cached;
    this.dataset.cachedTokens = String(cached);
    const passWhat = cached ? fill(gettext("%(computed)s computed, %(cached)s from the prefix cache"), { computed: promptTokens(computed), cached })
      : promptTokens(promptCount);

    // Every timed phase in order, on one millisecond axis.
    const phases = [["tokenize", pre.tokenize_ms, gettext("before the prefill")], ["prefill", pre.forward_ms, passWhat],
      ["capture", pre.capture_ms, gettext("after the prefill")]];
    steps.forEach((s, i) => {
      const t = s.timing || {};
      const where = fill(gettext("step %(step)s"), { step: i + 1 });
      if (t.forward_ms) phases.push(["forward", t.forward_ms, where]);
      phases.push(["capture", t.capture_ms, where], ["sampling", t.sampling_ms, where]);
    });
    const summed = phases.reduce((a, p) => a + (p[1] || 0), 0);
    const total = rs.done?.timing?.total_ms;
    const scale = Math.max(summed, total || 0, ttft || 0) || 1;
    const bar = el("div", { class: "he-timeline" });
    let at = 0;
    for (const [kind, t, where] of phases) {
      if (!t) continue;
      const seg = el("div", { class: `he-tseg ${KINDS[kind][0]}`, style: `left:${(at / scale) * 100}%;width:${(t / scale) * 100}%` });
      hover(seg, fill(gettext("%(kind)s, %(where)s: %(time)s (%(exact)s ms), from %(from)s to %(to)s ms"),
        { kind: gettext(KINDS[kind][1]), where, time: ms(t), exact: fmt(t), from: fmt(at), to: fmt(at + t) }), line);
      bar.append(seg);
      at += t;
    }
    if (ttft != null) {
      const mark = el("div", { class: "he-mark", style: `left:${(ttft / scale) * 100}%` });
      mark.append(el("span", { class: ttft / scale > 0.6 ? "he-mark-label he-left" : "he-mark-label" }, fill(gettext("first token %(time)s"), { time: ms(ttft) })));
      hover(mark, fill(gettext("time to first token (steps[0].timing.ttft_ms): %(ttft)s ms, prefill + first sampling"), { ttft: String(ttft) }), line);
      bar.append(mark);
    }
    const axis = el("div", { class: "he-axis" });
    axis.append(el("span", {}, "0 ms"), el("span", {}, `${fmt(scale, 1)} ms`));
    const untimed = total != null && total > summed * 1.05 ? el("p", { class: "he-col-sub" }, fill(gettext("The timed phases, laid end to end, add up to %(summed)s of the %(total)s end to end; "
      + "the empty rest of the track is time no phase measured (sending each step to your browser, bookkeeping between steps)."), { summed: ms(summed), total: ms(total) })) : null;

    // One column per forward pass: the prefill, then each decode step.
    const cols = el("div", { class: "he-tcols" });
    const passes = [{ label: "P", parts: [["prefill", pre.forward_ms], ["capture", pre.capture_ms]], title: gettext("prefill") }]
      .concat(steps.map((s, i) => ({ label: String(i + 1), title: fill(gettext("step %(step)s (%(forward)s)"), { step: i + 1, forward: s.forward }),
        parts: [["forward", s.timing?.forward_ms], ["capture", s.timing?.capture_ms], ["sampling", s.timing?.sampling_ms]] })));
    const tallest = Math.max(...passes.map((p) => p.parts.reduce((a, q) => a + (q[1] || 0), 0))) || 1;
    for (const p of passes) {
      const col = el("div", { class: "he-tcol" });
      const stack = el("div", { class: "he-stack" });
      for (const [kind, t] of p.parts) if (t) stack.append(el("div", { class: KINDS[kind][0], style: `height:${(t / tallest) * 100}%` }));
      col.append(stack, el("span", {}, p.label));
      hover(col, `${p.title}: ${p.parts.map(([k, t]) => `${gettext(PARTS[k])} ${ms(t)}`).join(", ")}`, line);
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
    const values = { forward: String(pre.forward_ms), tokens: tokens(computed), cached, total: promptCount };
    const tiles = stats([
      [gettext("time to first token"), ms(ttft), fill(gettext("steps[0].timing.ttft_ms = %(ttft)s ms: the prefill plus the first sampling"), { ttft: String(ttft) })],
      [gettext("prefill pass"), ms(pre.forward_ms), fill(cached
        ? gettext("prefill.timing.forward_ms = %(forward)s ms for %(tokens)s at once (the first %(cached)s of %(total)s came from the prefix cache: prefill.cached_tokens)")
        : gettext("prefill.timing.forward_ms = %(forward)s ms for %(tokens)s at once"), values)],
      [gettext("from the prefix cache"), fill(gettext("%(part)s of %(total)s"), { part: cached, total: promptCount }), prefixTitle(rs.prefill)],
      [gettext("decode pass (median)"), ms(median), fill(gettext("median forward_ms of %(steps)s, one token each"),
        { steps: count(decodes.length, ngettext("%(n)s decode step", "%(n)s decode steps", decodes.length)) })],
      [gettext("time per output token"), ms(d?.tpot_ms), d?.tpot_ms != null
        ? fill(gettext("done.timing.tpot_ms = (end-to-end %(total)s − TTFT %(ttft)s) / (%(n)s − 1) = %(tpot)s ms"), { total: fmt(d.total_ms), ttft: fmt(d.ttft_ms), n: String(n), tpot: fmt(d.tpot_ms) })
        : gettext("after the run ends, with at least 2 tokens")],
      [gettext("inter-token latency"), itl.median != null ? `${ms(itl.median)} · p95 ${ms(itl.p95)}` : "–", itl.median != null
        ? fill(gettext("ITL (vLLM's definition): the %(gaps)s between consecutive steps' timing.elapsed_ms, median %(median)s ms, p95 %(p95)s ms"),
          { gaps: count(itl.gaps, ngettext("%(n)s gap", "%(n)s gaps", itl.gaps)), median: fmt(itl.median), p95: fmt(itl.p95) })
        : gettext("from the second step on")],
      [gettext("end to end"), ms(d?.total_ms), d?.total_ms != null
        ? fill(gettext("done.timing.total_ms = %(total)s ms: from the start to the last token (vLLM's E2E latency)"), { total: String(d.total_ms) }) : gettext("after the run ends")],
      [gettext("tokens / s"), last?.tokens_per_s != null ? fmt(last.tokens_per_s, 1) : "–",
        fill(gettext("the run's last step's timing.tokens_per_s = %(rate)s: decode tokens per second over the whole run"), { rate: String(last?.tokens_per_s ?? "–") })],
      [gettext("causal-mask check"), check?.reused ? gettext("reused") : ms(check?.measured_ms), checkTitle(check)],
    ], line);
    const read = { tokens: promptTokens(promptCount), computed, cached, time: ms(pre.forward_ms), steps: count(steps.length, ngettext("%(n)s step", "%(n)s steps", steps.length)) };
    this.runPart.replaceChildren(tiles, bar, axis, ...(untimed ? [untimed] : []), legend(Object.values(KINDS).map(([cls, text]) => [cls, gettext(text)])),
      el("p", { class: "he-col-sub" }, gettext("Each forward pass, prefill (P) then decode steps, on one scale:")), cols, line,
      caption(`${fill(cached
        ? gettext("Measured over your whole run, whatever step the page shows: the prefill read %(tokens)s (computing %(computed)s: the first %(cached)s came from the prefix cache) "
          + "in one pass of %(time)s; %(steps)s followed (step 1 samples from the prefill, so it has no forward pass of its own).")
        : gettext("Measured over your whole run, whatever step the page shows: the prefill read %(tokens)s "
          + "in one pass of %(time)s; %(steps)s followed (step 1 samples from the prefill, so it has no forward pass of its own)."), read)} `
        + (total != null ? `${fill(gettext("End to end %(time)s."), { time: ms(total) })} ` : "") + gettext("Capture is what this page adds to draw the diagrams; a production server skips it.")));
  }

  drawPrefix(rs) {
    this.prefixPart.replaceChildren(...prefixPart(rs.prefill, readout(gettext("Hover or tap a tile for what it counts."))));
    const state = this.prefixMeasure.sync(rs);
    if (state.data) this.dataset.prefixSavedMs = String(state.data.saved_ms); else delete this.dataset.prefixSavedMs;
    this.savingPart.replaceChildren(...(state.data ? savingPart(state.data) : [this.prefixMeasure.placeholder(state,
      gettext("Press the button to time your prompt's prefill twice on this server: from the prefix its own prefill found in the cache, and from nothing."))]));
  }

  drawMeasured(rs) {
    const state = this.measure.sync(rs);
    const data = state.data;
    if (!data) {
      delete this.dataset.lengths;
      delete this.dataset.prefillInDecodeSteps;
      this.servedPart.replaceChildren(this.measure.placeholder(state,
        gettext("Press the button to time a prefill at several prompt lengths, each followed by one decode step, on this server's model (random tokens).")));
      return;
    }
    const rows = data.rows;
    this.dataset.lengths = rows.map((r) => r.prompt_tokens).join(",");
    this.dataset.prefillInDecodeSteps = String(rows[rows.length - 1].prefill_ms / rows[rows.length - 1].decode_ms);
    const line = readout(gettext("Hover or tap a point or a bar for its value."));
    const chart = lineChart([
      { name: "prefill", cls: "he-c-prefill", points: rows.map((r) => ({ x: r.prompt_tokens, y: r.prefill_ms,
        title: fill(gettext("prefill of %(tokens)s: %(ms)s ms (%(rate)s tokens/s)"),
          { tokens: tokens(r.prompt_tokens), ms: String(r.prefill_ms), rate: fmt(data.prefill_tokens_per_s[r.prompt_tokens], 1) }) })) },
      { name: "decode", cls: "he-c-decode", points: rows.map((r) => ({ x: r.prompt_tokens, y: r.decode_ms,
        title: fill(gettext("one decode step after %(tokens)s: %(ms)s ms"), { tokens: tokens(r.prompt_tokens), ms: String(r.decode_ms) }) })) },
    ], { xLabel: gettext("prompt tokens"), yLabel: "ms", line });
    const longest = rows[rows.length - 1];
    const weights = { flops: int(data.flops_per_token), bytes: int(data.weight_bytes) };
    const intensity = [{ label: gettext("decode, 1 token"), value: data.decode_intensity, text: fmt(data.decode_intensity, 2), cls: "he-t-forward",
      title: fill(gettext("decode: %(flops)s FLOPs per token / %(bytes)s bytes of weights read = %(intensity)s FLOPs per byte"), { ...weights, intensity: String(data.decode_intensity) }) }]
      .concat(Object.entries(data.prefill_intensity).map(([p, v]) => ({ label: fill(gettext("prefill, %(tokens)s"), { tokens: tokens(p) }), value: v, text: fmt(v, 1), cls: "he-t-prefill",
        title: fill(gettext("prefill of %(tokens)s: %(n)s × %(flops)s FLOPs / %(bytes)s bytes = %(intensity)s FLOPs per byte"), { ...weights, tokens: tokens(p), n: p, intensity: String(v) }) })));
    const L = longest.prompt_tokens;
    this.servedPart.replaceChildren(
      chart, legend([["he-t-prefill", gettext("prefill (time to first token)")], ["he-t-forward", gettext("one decode step")]]),
      stats([
        [gettext("decode tokens / s"), fmt(data.decode_tokens_per_s, 1), fill(gettext("1000 / decode_ms of the last row = %(rate)s"), { rate: String(data.decode_tokens_per_s) })],
        [fill(gettext("prefill tokens / s (%(n)s)"), { n: L }), fmt(data.prefill_tokens_per_s[L], 1), fill(gettext("%(tokens)s / %(ms)s ms"), { tokens: tokens(L), ms: String(longest.prefill_ms) })],
        [gettext("weights read per pass"), bytes(data.weight_bytes), fill(gettext("%(bytes)s bytes: %(parameters)s"),
          { bytes: int(data.weight_bytes), parameters: count(data.parameters, ngettext("%(n)s parameter", "%(n)s parameters", data.parameters)) })],
        [fill(gettext("one %(n)s-token prefill stalls"), { n: L }), fill(gettext("%(n)s decode steps"), { n: fmt(longest.prefill_ms / longest.decode_ms, 1) }),
          fill(gettext("%(prefill)s ms prefill / %(decode)s ms per decode step: how long a reply streaming beside it waits, unless the phases are disaggregated"),
            { prefill: String(longest.prefill_ms), decode: String(longest.decode_ms) }), "he-stall"],
      ], line),
      el("p", { class: "he-col-sub" }, gettext("Arithmetic intensity: FLOPs done per byte of weights read (2 × parameters per token):")),
      bars(intensity, line),
      el("p", {}, sentences([
        fill(gettext("A decode step does about %(intensity)s floating-point operations per byte of weights it reads: every weight is fetched from memory "
          + "to produce a single token."), { intensity: fmt(data.decode_intensity, 2) }),
        fill(gettext("A prefill of %(tokens)s reuses each fetched weight %(times)s (%(intensity)s per byte)."),
          { tokens: tokens(L), times: count(L, ngettext("%(n)s time", "%(n)s times", L)), intensity: fmt(data.prefill_intensity[L], 1) }),
        gettext("Processors can do far more arithmetic per byte than decode asks of them, so decode spends its time waiting on memory: it is memory-bound, and prefill is compute-bound."),
      ])),
      line,
      caption(`${gettext("Measured on this server's model: for each prompt length, one timed prefill over random tokens and then one decode step (after a warm-up pass).")} `
        + gettext("Intensity is computed from the model's size, not timed.")));
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
