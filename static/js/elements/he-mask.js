// <he-mask>: the causal mask over the prompt (prefill.mask {size, sliding_window}) and the live check
// runState.checks.causal_mask {passed, data: {change_at, original, replacement, max_abs_change[], earlier_unchanged}}.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { matrix, scroller, fillParts } from "../lib/grid.js";
import { fill, gettext, grouped, ngettext, sentences } from "../lib/i18n.js";

class HeMask extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre?.mask) { this.root.replaceChildren(el("p", { class: "he-empty" }, gettext("Press play: the mask over your prompt appears here."))); return; }
    this.dataset.size = String(pre.mask.size);
    const check = state.checks?.causal_mask;
    if (check) this.dataset.checkPassed = String(check.passed);
    const { size, sliding_window: win } = pre.mask;
    const tokens = pre.tokens || [];
    const labels = Array.from({ length: size }, (_, i) => showPiece(tokens[i]?.text ?? `#${i}`));
    const name = (i) => fill(gettext("position %(position)s %(text)s"), { position: i, text: JSON.stringify(tokens[i]?.text ?? "") });
    const why = {
      later: gettext("masked: a later position"), visible: gettext("visible"),
      outside: win == null ? "" : fill(ngettext("masked: more than %(n)s position back (sliding window)",
        "masked: more than %(n)s positions back (sliding window)", win), { n: grouped(win) }),
    };
    let visible = 0;

    const grid = matrix({
      label: gettext("Causal mask: which keys each query position may read"),
      corner: gettext("query ↓ key →"),
      rows: labels, cols: labels,
      rowTitle: (r) => fill(gettext("query %(query)s"), { query: name(r) }), colTitle: (c) => fill(gettext("key %(key)s"), { key: name(c) }),
      cell: (q, k) => {
        const future = k > q;
        const outside = !future && win != null && q - k > win;
        if (!future && !outside) visible += 1;
        const reason = future ? why.later : outside ? why.outside : why.visible;
        return { cls: future || outside ? "masked" : "open",
          title: fill(gettext("query %(query)s → key %(key)s: %(why)s"), { query: name(q), key: name(k), why: reason }) };
      },
    });

    const head = el("p", { class: "he-head" });
    const pairs = el("strong", {}, fill(gettext("%(visible)s of %(total)s"), { visible, total: size * size }));
    head.append(...fillParts(win != null
      ? gettext("Mask for the %(size)s-token prompt: %(pairs)s query→key pairs are visible; sliding window %(window)s.")
      : gettext("Mask for the %(size)s-token prompt: %(pairs)s query→key pairs are visible."), { size: String(size), pairs, window: String(win) }));
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "swatch open" }, gettext("may read")), el("span", { class: "swatch masked" }, gettext("masked")));

    const above = size * (size - 1) / 2;
    const parts = [head, legend, scroller(grid), caption(sentences([
      win != null ? fill(gettext("Measured on this run: row q may read keys 0…q; the %(cells)s cells above the diagonal are masked, "
        + "and so are keys more than %(window)s back."), { cells: above, window: win })
        : fill(gettext("Measured on this run: row q may read keys 0…q; the %(cells)s cells above the diagonal are masked."), { cells: above }),
      gettext("Hover a cell for its query and key."),
    ]))];
    parts.push(...this.#check(state.checks?.causal_mask, tokens));
    this.root.replaceChildren(...parts);
  }

  #check(check, tokens) {
    const title = el("h3", { class: "he-subhead" }, gettext("Live check: change one token, see who notices"));
    if (!check?.data) return [title, el("p", { class: "he-empty" }, gettext("The live check has not reported on this run yet."))];
    const { change_at: at, original, replacement, max_abs_change: moved = [], earlier_unchanged: same } = check.data;
    const n = moved.length;
    const max = Math.max(0, ...moved.filter(Number.isFinite));
    const label = (i) => showPiece(tokens[i]?.text ?? `#${i}`);

    const bars = el("div", { class: "he-bars", role: "list", style: `--cols:${n}`, "aria-label": gettext("Change of the final hidden state per position") });
    for (let i = 0; i < n; i++) {
      const v = moved[i];
      const cls = i === at ? "changed" : i < at ? "before" : "after";
      const item = el("span", {
        class: `bar-col ${cls}`, role: "listitem",
        title: fill(i === at ? gettext("position %(position)s %(text)s: final hidden state moved by %(change)s (max |Δ|) — the replaced token")
          : i < at ? gettext("position %(position)s %(text)s: final hidden state moved by %(change)s (max |Δ|) — before the change")
            : gettext("position %(position)s %(text)s: final hidden state moved by %(change)s (max |Δ|)"),
        { position: i, text: JSON.stringify(tokens[i]?.text ?? ""), change: fmt(v, 6) }),
      });
      item.append(el("span", { class: "bar", style: `height:${max ? Math.max(v > 0 ? 2 : 0, (100 * v) / max) : 0}%` }), el("span", { class: "tick" }, label(i)));
      bars.append(item);
    }
    const verdict = el("p", { class: `he-verdict ${check.passed ? "pass" : "fail"}` },
      check.passed ? gettext("Passed: nothing before the change moved.") : gettext("Failed: an earlier position changed."));
    const before = moved.slice(0, at).filter(Number.isFinite);
    const maxBefore = before.length ? Math.max(...before) : 0;
    return [title, verdict, scroller(bars), caption(sentences([
      fill(gettext("Measured on this run: the token at position %(position)s was replaced (%(original)s id %(original_id)s → "
        + "%(replacement)s id %(replacement_id)s) and the prompt run again."), { position: at,
        original: String(JSON.stringify(original?.text)), original_id: String(original?.id),
        replacement: String(JSON.stringify(replacement?.text)), replacement_id: String(replacement?.id) }),
      ...(check.data.from_prefix_cache ? [fill(gettext("Both passes began from the prefix cache's keys and values for the first "
        + "%(cached)s positions, as this run's own prefill did, so those positions are the same numbers in both; positions "
        + "%(first)s to %(last)s were computed in each pass."), { cached: String(check.data.from_prefix_cache),
        first: String(check.data.from_prefix_cache), last: String(n - 1) })] : []),
      fill(same ? gettext("Largest change before position %(position)s: %(before)s (unchanged); at and after it: up to %(max)s.")
        : gettext("Largest change before position %(position)s: %(before)s; at and after it: up to %(max)s."),
      { position: at, before: fmt(maxBefore, 6), max: fmt(max, 4) }),
      gettext("Bars: max |Δ| of each position's final hidden state."),
    ]))];
  }
}

define("he-mask", HeMask);
