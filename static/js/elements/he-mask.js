// <he-mask>: the causal mask over the prompt (prefill.mask {size, sliding_window}) and the live check
// runState.checks.causal_mask {passed, data: {change_at, original, replacement, max_abs_change[], earlier_unchanged}}.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { matrix, scroller } from "../lib/grid.js";
import { plural } from "../lib/plural.js";

class HeMask extends SteppedElement {
  render(state) {
    const pre = state.prefill;
    if (!pre?.mask) { this.root.replaceChildren(el("p", { class: "he-empty" }, "Press play: the mask over your prompt appears here.")); return; }
    this.dataset.size = String(pre.mask.size);
    const check = state.checks?.causal_mask;
    if (check) this.dataset.checkPassed = String(check.passed);
    const { size, sliding_window: win } = pre.mask;
    const tokens = pre.tokens || [];
    const labels = Array.from({ length: size }, (_, i) => showPiece(tokens[i]?.text ?? `#${i}`));
    const name = (i) => `position ${i} ${JSON.stringify(tokens[i]?.text ?? "")}`;
    let visible = 0;

    const grid = matrix({
      label: "Causal mask: which keys each query position may read",
      corner: "query ↓ key →",
      rows: labels, cols: labels,
      rowTitle: (r) => `query ${name(r)}`, colTitle: (c) => `key ${name(c)}`,
      cell: (q, k) => {
        const future = k > q;
        const outside = !future && win != null && q - k > win;
        if (!future && !outside) visible += 1;
        const why = future ? "masked: a later position" : outside ? `masked: more than ${plural(win, "position")} back (sliding window)` : "visible";
        return { cls: future || outside ? "masked" : "open", title: `query ${name(q)} → key ${name(k)}: ${why}` };
      },
    });

    const head = el("p", { class: "he-head" });
    head.append(`Mask for the ${size}-token prompt: `, el("strong", {}, `${visible} of ${size * size}`),
      " query→key pairs are visible" + (win != null ? `; sliding window ${win}.` : "."));
    const legend = el("p", { class: "he-legend" });
    legend.append(el("span", { class: "swatch open" }, "may read"), el("span", { class: "swatch masked" }, "masked"));

    const parts = [head, legend, scroller(grid), caption(
      `Measured on this run: row q may read keys 0…q; the ${size * (size - 1) / 2} cells above the diagonal are masked` +
      (win != null ? `, and so are keys more than ${win} back` : "") + ". Hover a cell for its query and key.",
    )];
    parts.push(...this.#check(state.checks?.causal_mask, tokens));
    this.root.replaceChildren(...parts);
  }

  #check(check, tokens) {
    const title = el("h3", { class: "he-subhead" }, "Live check: change one token, see who notices");
    if (!check?.data) return [title, el("p", { class: "he-empty" }, "The live check has not reported on this run yet.")];
    const { change_at: at, original, replacement, max_abs_change: moved = [], earlier_unchanged: same } = check.data;
    const n = moved.length;
    const max = Math.max(0, ...moved.filter(Number.isFinite));
    const label = (i) => showPiece(tokens[i]?.text ?? `#${i}`);

    const bars = el("div", { class: "he-bars", role: "list", style: `--cols:${n}`, "aria-label": "Change of the final hidden state per position" });
    for (let i = 0; i < n; i++) {
      const v = moved[i];
      const cls = i === at ? "changed" : i < at ? "before" : "after";
      const item = el("span", {
        class: `bar-col ${cls}`, role: "listitem",
        title: `position ${i} ${JSON.stringify(tokens[i]?.text ?? "")}: final hidden state moved by ${fmt(v, 6)} (max |Δ|)` +
          (i === at ? " — the replaced token" : i < at ? " — before the change" : ""),
      });
      item.append(el("span", { class: "bar", style: `height:${max ? Math.max(v > 0 ? 2 : 0, (100 * v) / max) : 0}%` }), el("span", { class: "tick" }, label(i)));
      bars.append(item);
    }
    const verdict = el("p", { class: `he-verdict ${check.passed ? "pass" : "fail"}` },
      check.passed ? "Passed: nothing before the change moved." : "Failed: an earlier position changed.");
    const before = moved.slice(0, at).filter(Number.isFinite);
    const maxBefore = before.length ? Math.max(...before) : 0;
    return [title, verdict, scroller(bars), caption(
      `Measured on this run: the token at position ${at} was replaced (${JSON.stringify(original?.text)} id ${original?.id} → ` +
      `${JSON.stringify(replacement?.text)} id ${replacement?.id}) and the prompt run again. ` +
      `Largest change before position ${at}: ${fmt(maxBefore, 6)}${same ? " (unchanged)" : ""}; at and after it: up to ${fmt(max, 4)}. ` +
      "Bars: max |Δ| of each position's final hidden state.",
    )];
  }
}

define("he-mask", HeMask);
