// <he-compare>: two runs of one prompt side by side, step-locked (issue 29). Its data is a CompareRun
// (compare-run.js): run A, run B and one `compare` message per step both took. It draws both replies
// token-aligned (one column per step, the first parting step marked), and for the page's step the two draws
// side by side: each run's probability of the other's token, KL(A ‖ B), Jensen-Shannon, the largest raw-logit
// difference, both top 5, and what each run cost. A click on a token moves the page's step bar there (he-seek).
import { SteppedElement, define, el, caption, showPiece, fmt, bytes } from "../lib/base-element.js";
import { chip, pct } from "../lib/widgets.js";
import { decimal, fill, gettext, ngettext, sentences } from "../lib/i18n.js";

const RUNS = ["a", "b"];
/** A probability as a percentage; one too small for that (a token the other run all but ruled out) as 1.4e-21. */
function prob(p) {
  if (p == null || !Number.isFinite(p) || p === 0 || p >= 1e-5) return pct(p);
  const [mantissa, exponent] = p.toExponential(1).split("e");
  return `${decimal(Number(mantissa), 1)}e${exponent}`;
}
const raw = (x) => (x == null || !Number.isFinite(x) ? "" : String(x)); // the payload's number, exact, for a reader

class HeCompare extends SteppedElement {
  render(pair) {
    if (!pair?.active) { this.#empty(); return; }
    const count = pair.count;
    const k = this.step(count);
    this.dataset.steps = String(count);
    const parting = pair.firstParting;
    this.dataset.firstPartingStep = parting == null ? "" : String(parting);
    const c = pair.at(k);
    this.#figures(pair, k, c);

    const focused = this.#focusedCell();
    const parts = [this.#heading(pair), this.#partingLine(pair, parting), this.#rows(pair, k, parting)];
    parts.push(...this.#detail(pair, k, c));
    this.root.replaceChildren(...parts);
    this.#keepCurrentInView();
    if (focused) this.root.querySelector(`button[data-run="${focused.run}"][data-step="${focused.step}"]`)?.focus({ preventScroll: true });
  }

  #empty() {
    for (const key of Object.keys(this.dataset)) if (key !== "rendered") delete this.dataset[key];
    this.root.replaceChildren(el("p", { class: "he-empty" },
      gettext("No comparison yet. Press “Compare with…” in the run bar, choose what run B changes, then Play: both replies appear here, token by token.")));
  }

  /** The numbers a reader (or a test) can check against the `compare` message of the step shown. */
  #figures(pair, k, c) {
    const d = this.dataset;
    d.kl = c ? (c.kl_infinite ? "inf" : raw(c.kl)) : "";
    d.js = raw(c?.js);
    d.aProbOfB = raw(c?.a_prob_of_b);
    d.bProbOfA = raw(c?.b_prob_of_a);
    d.maxLogitDiff = raw(c?.max_logit_diff);
    d.tokenA = c ? String(c.token_a.id) : "";
    d.tokenB = c ? String(c.token_b.id) : "";
    d.parted = c ? String(Boolean(c.parted)) : "";
    for (const run of RUNS) {
      const rv = pair[run];
      const shown = k ? rv.steps[Math.min(k, rv.steps.length) - 1] : null;
      const last = rv.steps[rv.steps.length - 1];
      const suffix = run.toUpperCase();
      d[`tokensPerS${suffix}`] = raw(last?.timing?.tokens_per_s);
      d[`kvBytes${suffix}`] = raw((shown ?? rv.prefill)?.kv?.bytes);
    }
  }

  #heading(pair) {
    const head = el("p", { class: "he-cmp-labels" });
    head.append(el("span", { class: "he-cmp-label he-cmp-a" }, pair.label("a")), " ",
      el("span", { class: "he-cmp-vs" }, gettext("vs")), " ", el("span", { class: "he-cmp-label he-cmp-b" }, pair.label("b")));
    return head;
  }

  #partingLine(pair, parting) {
    const compared = pair.comparisons.filter(Boolean).length;
    const line = el("p", { class: "he-cmp-parting", "aria-live": "polite" });
    if (parting != null) {
      line.append(el("strong", { class: "he-cmp-part-here" }, fill(gettext("They part here: step %(step)s"), { step: parting })), " ",
        parting > 1 ? fill(ngettext("(step %(n)s drew the same token in both runs).", "(steps 1 to %(n)s drew the same tokens in both runs).", parting - 1), { n: parting - 1 })
          : gettext("(they drew different tokens from the very first step)."));
    } else if (compared) {
      line.textContent = fill(ngettext("No parting so far: both runs drew the same token at step %(n)s.", "No parting so far: both runs drew the same tokens at all %(n)s steps.", compared), { n: compared });
    } else {
      line.textContent = gettext("Both runs are reading the prompt; their first tokens come next.");
    }
    return line;
  }

  /** Both replies, one column per step: the two tokens of a step one above the other. */
  #rows(pair, k, parting) {
    const count = pair.count;
    const table = el("table", { class: "he-cmp-rows" });
    table.append(el("caption", { class: "visually-hidden" }, gettext("The two replies, token by token: one column per step")));
    const head = el("tr");
    head.append(el("th", { scope: "col" }, gettext("step")));
    for (let s = 1; s <= count; s++) {
      const c = pair.at(s);
      const th = el("th", { scope: "col", class: this.#cellClass(s, k, parting, c), "data-step": s });
      th.append(String(s));
      if (s === parting) th.append(el("span", { class: "he-cmp-part-tag" }, gettext("parts here")));
      else if (c?.parted) th.append(el("span", { class: "he-cmp-ne", title: gettext("different tokens") }, "≠"));
      if (s === k) th.setAttribute("aria-current", "step");
      head.append(th);
    }
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    const buttons = { a: [], b: [] };
    for (const run of RUNS) {
      const rv = pair[run];
      const tr = el("tr", { "data-run": run });
      tr.append(el("th", { scope: "row", class: `he-cmp-runhead he-cmp-${run}` }, pair.label(run)));
      for (let s = 1; s <= count; s++) {
        const step = rv.steps[s - 1];
        const c = pair.at(s);
        const td = el("td", { class: this.#cellClass(s, k, parting, c), "data-step": s });
        if (step) {
          const label = [fill(run === "a" ? gettext("Step %(step)s, run A: %(token)s (id %(id)s), p = %(p)s") : gettext("Step %(step)s, run B: %(token)s (id %(id)s), p = %(p)s"),
            { step: s, token: showPiece(step.token.text), id: step.token.id, p: pct(step.token.prob) })];
          if (s === parting) label.push(gettext("the runs part here"));
          else if (c?.parted) label.push(gettext("different tokens"));
          const button = el("button", { type: "button", class: "he-cmp-tok", "data-run": run, "data-step": s, "data-id": step.token.id,
            "aria-label": label.join("; "), title: label.join("; ") });
          button.append(el("span", { class: "he-piece" }, showPiece(step.token.text)));
          button.addEventListener("click", () => this.dispatchEvent(new CustomEvent("he-seek", { bubbles: true, composed: true, detail: { step: s } })));
          td.append(button);
          buttons[run][s - 1] = button;
        } else if (rv.done && s > rv.steps.length) {
          td.append(el("span", { class: "he-cmp-ended" }, s === rv.steps.length + 1 ? gettext("ended") : ""));
        }
        tr.append(td);
      }
      body.append(tr);
    }
    this.#keys(buttons);
    table.append(thead, body);
    const scroll = el("div", { class: "he-scroll he-cmp-scroll", role: "region", "aria-label": gettext("The two replies, token by token") });
    scroll.append(table);
    return scroll;
  }

  #cellClass(s, k, parting, c) {
    return [s === parting ? "parted-at" : "", c?.parted ? "he-cmp-parted" : "", s === k ? "he-current" : ""].filter(Boolean).join(" ");
  }

  /** One tab stop for the token cells: ←/→ along a run, ↑/↓ to the other run's token of the same step, Home/End. */
  #keys(buttons) {
    const all = [...buttons.a, ...buttons.b].filter(Boolean);
    const current = all.find((b) => b.closest("td").classList.contains("he-current")) ?? all[0];
    for (const b of all) b.tabIndex = b === current ? 0 : -1;
    for (const b of all) {
      b.addEventListener("focus", () => { for (const o of all) o.tabIndex = o === b ? 0 : -1; });
      b.addEventListener("keydown", (e) => {
        const run = b.dataset.run, s = Number(b.dataset.step) - 1, row = buttons[run].filter(Boolean);
        const other = buttons[run === "a" ? "b" : "a"];
        const to = { ArrowRight: buttons[run][s + 1], ArrowLeft: buttons[run][s - 1], ArrowDown: other[s], ArrowUp: other[s],
          Home: row[0], End: row[row.length - 1] }[e.key];
        if (!(e.key in { ArrowRight: 1, ArrowLeft: 1, ArrowDown: 1, ArrowUp: 1, Home: 1, End: 1 })) return;
        e.preventDefault(); // the page's step bar must not take these too
        e.stopPropagation();
        to?.focus();
      });
    }
  }

  #focusedCell() {
    const active = this.shadowRoot?.activeElement;
    return active?.classList?.contains("he-cmp-tok") ? { run: active.dataset.run, step: active.dataset.step } : null;
  }

  /** The current step's column scrolled into its box (never the page). */
  #keepCurrentInView() {
    requestAnimationFrame(() => {
      const scroll = this.root.querySelector(".he-cmp-scroll");
      const cell = scroll?.querySelector("th.he-current");
      if (!cell) return;
      const left = cell.offsetLeft, right = left + cell.offsetWidth;
      const head = scroll.querySelector("th")?.offsetWidth ?? 0; // the sticky row labels cover the left edge
      if (left - head < scroll.scrollLeft) scroll.scrollLeft = Math.max(0, left - head - 8);
      else if (right > scroll.scrollLeft + scroll.clientWidth) scroll.scrollLeft = right - scroll.clientWidth + 8;
    });
  }

  /** The step shown: both draws, how far apart the distributions are, both top 5, what each run cost. */
  #detail(pair, k, c) {
    if (!k) {
      return [el("p", { class: "he-cmp-note" }, gettext("Step 0 is the prefill: both runs read the same prompt. Move the step bar to a generated token to compare the two draws."))];
    }
    const out = [el("h3", { class: "he-subhead" }, fill(gettext("Step %(step)s, side by side"), { step: k }))];
    const ended = RUNS.filter((run) => pair[run].steps.length < k);
    if (!c) {
      for (const run of ended) {
        const rv = pair[run];
        out.push(el("p", { class: "he-cmp-note" }, fill(run === "a" ? gettext("Run A ended after step %(n)s (%(reason)s); run B went on alone, so there is nothing to compare at step %(step)s.")
          : gettext("Run B ended after step %(n)s (%(reason)s); run A went on alone, so there is nothing to compare at step %(step)s."),
        { n: rv.steps.length, reason: rv.done?.stop_reason ?? rv.steps[rv.steps.length - 1]?.stop_reason ?? "–", step: k })));
      }
      if (!ended.length) out.push(el("p", { class: "he-cmp-note" }, gettext("The comparison of this step comes once both runs have drawn it.")));
    }
    out.push(this.#drawTable(pair, k, c), this.#distanceTable(k, c));
    if (c) out.push(this.#topTable(pair, k, c));
    const fork = this.#forkBoth(pair, k, c);
    if (fork) out.push(fork);
    out.push(caption(sentences([
      gettext("Each run samples from its own context: once they have drawn different tokens, they read different texts, so later steps compare two runs, not one model read twice."),
      gettext("KL(A ‖ B) is how much run A's distribution differs from run B's, in nats (infinite when B gives probability 0 to a token A could draw); Jensen–Shannon is its symmetric form, always finite, at most ln 2 ≈ 0.693."),
      gettext("Both are computed on the final distributions, after each run's temperature and filters; the logit difference is on the raw scores, before them, which is where quantized weights show."),
    ])));
    return out;
  }

  #drawTable(pair, k, c) {
    const table = el("table", { class: "he-table he-cmp-table" });
    table.append(el("caption", {}, fill(gettext("Step %(step)s: what each run drew, and what it cost"), { step: k })));
    const head = el("tr");
    head.append(el("th", { scope: "col" }, gettext("figure")), el("th", { scope: "col", class: "he-cmp-a" }, pair.label("a")), el("th", { scope: "col", class: "he-cmp-b" }, pair.label("b")));
    const thead = el("thead");
    thead.append(head);
    const steps = { a: pair.a.steps[k - 1], b: pair.b.steps[k - 1] };
    const body = el("tbody");
    const row = (label, cells, key) => {
      const tr = el("tr", key ? { "data-row": key } : {});
      tr.append(el("th", { scope: "row" }, label));
      for (const cell of cells) {
        const td = el("td");
        if (cell && typeof cell === "object" && "node" in cell) { td.append(cell.node); if (cell.value != null) td.dataset.value = cell.value; }
        else td.textContent = cell ?? "–";
        tr.append(td);
      }
      body.append(tr);
    };
    const token = (run) => {
      const t = c ? c[`token_${run}`] : steps[run]?.token;
      return t ? { node: chip(t.text, t.id, "he-chosen"), value: String(t.id) } : "–";
    };
    row(gettext("token drawn"), [token("a"), token("b")], "token");
    const own = (run) => { const t = c ? c[`token_${run}`] : steps[run]?.token; return t ? { node: document.createTextNode(prob(t.prob)), value: raw(t.prob) } : "–"; };
    row(gettext("its probability in its own run"), [own("a"), own("b")], "prob");
    if (c) {
      const other = (p) => (c.same_tokenizer ? { node: document.createTextNode(prob(p)), value: raw(p) } : gettext("– (another vocabulary)"));
      row(gettext("probability of the other run's token"), [other(c.a_prob_of_b), other(c.b_prob_of_a)], "other");
    }
    const last = (run) => pair[run].steps[pair[run].steps.length - 1];
    const tps = (run) => { const v = last(run)?.timing?.tokens_per_s; return v == null ? "–" : { node: document.createTextNode(fill(gettext("%(rate)s tokens/s"), { rate: fmt(v, 1) })), value: raw(v) }; };
    row(gettext("speed (tokens per second, at its last step)"), [tps("a"), tps("b")], "tokens_per_s");
    const kv = (run) => { const s = steps[run] ?? last(run); return s?.kv ? { node: document.createTextNode(bytes(s.kv.bytes)), value: raw(s.kv.bytes) } : "–"; };
    row(gettext("KV cache held (bytes of keys and values)"), [kv("a"), kv("b")], "kv_bytes");
    table.append(thead, body);
    const scroll = el("div", { class: "he-scroll" });
    scroll.append(table);
    return scroll;
  }

  #distanceTable(k, c) {
    const table = el("table", { class: "he-table he-cmp-table he-cmp-distance" });
    table.append(el("caption", {}, fill(gettext("Step %(step)s: how far apart the two distributions are"), { step: k })));
    const head = el("tr");
    head.append(el("th", { scope: "col" }, gettext("measure")), el("th", { scope: "col" }, gettext("value")));
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    const row = (label, text, key, value) => {
      const tr = el("tr", { "data-row": key });
      const td = el("td", value != null ? { "data-value": value } : {}, text);
      tr.append(el("th", { scope: "row" }, label), td);
      body.append(tr);
    };
    const other = !c ? gettext("– (only one run drew this step)") : gettext("– (the two models have different vocabularies)");
    const known = c && c.same_tokenizer;
    row("KL(A ‖ B)", known ? (c.kl_infinite ? gettext("∞: run B gives probability 0 to a token run A could draw") : fill(gettext("%(value)s nats"), { value: fmt(c.kl, 4) })) : other,
      "kl", known ? (c.kl_infinite ? "inf" : raw(c.kl)) : null);
    row(gettext("Jensen–Shannon"), known && c.js != null ? fill(gettext("%(value)s nats"), { value: fmt(c.js, 4) }) : other, "js", known ? raw(c.js) : null);
    row(gettext("largest |raw logit A − raw logit B|"), known && c.max_logit_diff != null ? fmt(c.max_logit_diff, 4) : other, "max_logit_diff", known ? raw(c.max_logit_diff) : null);
    table.append(thead, body);
    return table;
  }

  #topTable(pair, k, c) {
    const table = el("table", { class: "he-table he-cmp-table he-cmp-top" });
    table.append(el("caption", {}, fill(gettext("Step %(step)s: the five most likely tokens of each run (outlined: the one it drew)"), { step: k })));
    const head = el("tr");
    head.append(el("th", { scope: "col" }, gettext("rank")), el("th", { scope: "col", class: "he-cmp-a" }, pair.label("a")), el("th", { scope: "col" }, "p"),
      el("th", { scope: "col", class: "he-cmp-b" }, pair.label("b")), el("th", { scope: "col" }, "p"));
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    const n = Math.max(c.top_a?.length ?? 0, c.top_b?.length ?? 0);
    for (let i = 0; i < n; i++) {
      const tr = el("tr");
      tr.append(el("td", {}, String(i + 1)));
      for (const run of RUNS) {
        const t = c[`top_${run}`]?.[i];
        const drawn = t && t.id === c[`token_${run}`].id;
        const cell = el("td");
        if (t) {
          cell.append(chip(t.text, t.id, drawn ? "he-chosen" : ""));
          if (drawn) cell.append(el("span", { class: "visually-hidden" }, ` ${gettext("(drawn)")}`));
        }
        tr.append(cell, el("td", {}, t ? prob(t.prob) : ""));
      }
      body.append(tr);
    }
    table.append(thead, body);
    const scroll = el("div", { class: "he-scroll" });
    scroll.append(table);
    return scroll;
  }

  /** "Fork both with this token": both runs continue from step k with the same token (fork run "both"). */
  #forkBoth(pair, k, c) {
    if (!c || !c.same_tokenizer || pair.a.forkable === false) return null;
    const row = el("div", { class: "he-forks he-cmp-forks", role: "group", "data-step": k,
      "aria-label": fill(gettext("Fork both runs at step %(step)s with one token"), { step: k }) });
    row.append(el("span", { class: "he-forks-label" }, fill(gettext("Fork both runs at step %(step)s with this token:"), { step: k })));
    const seen = new Set();
    for (const t of [c.token_a, c.token_b, ...(c.top_a || []), ...(c.top_b || [])]) {
      if (!t || seen.has(t.id) || t.text == null) continue;
      seen.add(t.id);
      const label = fill(gettext("fork both with this token: continue both runs from step %(step)s with %(token)s (id %(id)s)"), { step: k, token: showPiece(t.text), id: t.id });
      const button = el("button", { type: "button", class: "he-fork he-fork-both", "data-token-id": t.id, title: label, "aria-label": label });
      button.append(chip(t.text, t.id));
      button.addEventListener("click", () => this.dispatchEvent(new CustomEvent("he-request", {
        bubbles: true, composed: true, detail: { type: "fork", step: k, token_id: t.id, run: "both", continue: true } })));
      row.append(button);
      if (seen.size >= 8) break;
    }
    return row;
  }
}

define("he-compare", HeCompare);
