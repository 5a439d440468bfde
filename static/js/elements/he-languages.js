// <he-languages>: what a language costs (issue 28). One meaning in six languages, each line editable, read by this
// server's own tokenizer: the tokens each takes, characters per token, characters whose bytes the tokenizer
// split over several tokens, the KV cache those tokens hold on this model, and on request each line's prefill
// timed on this server; every figure beside English's, in words too. Nothing here is translated: each line is
// model input, shown as typed (dir="auto": Arabic reads right to left).
import { SteppedElement, define, el, caption, bytes, showPiece } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, ms } from "../lib/measure.js";
import { plural } from "../lib/plural.js";

const ratio = (x) => (x == null ? "–" : `${x.toFixed(x >= 10 ? 0 : 1)}×`);

class HeLanguages extends SteppedElement {
  render(rs) {
    this.counts ??= new Measure(this, "languages", { label: "Count again", fields: ["lines"], extra: () => this.lines() });
    this.timing ??= new Measure(this, "languages_prefill", { label: "Time each prefill on this server", fields: ["lines"], extra: () => this.lines() });
    if (!this.tablePart) {
      this.tablePart = el("div", { class: "he-part" });
      this.timePart = el("div", { class: "he-part" });
      this.root.replaceChildren(this.counts.node, this.tablePart, this.timing.node, this.timePart);
    }
    const counted = this.counts.sync(rs);
    const timed = this.timing.sync(rs);
    if (!counted.data) {
      this.tablePart.replaceChildren(this.counts.placeholder(counted, "The server reads one sentence in six languages with its tokenizer."));
      this.timePart.replaceChildren();
      return;
    }
    this.inputs ??= this.makeInputs(counted.data.rows);
    this.drawTable(counted.data);
    this.timePart.replaceChildren(...(timed.data ? [this.timeWords(timed.data)] : [this.timing.placeholder(timed,
      "Press the button: the server times each line's prefill (the median of 3), as the queue allows.")]));
  }

  /** An editable box per line, kept across redraws (the visitor's edits are what "Count again" sends). */
  makeInputs(rows) {
    return rows.map((r) => {
      const input = el("input", { type: "text", value: r.text, lang: r.lang, dir: "auto", maxlength: "400", "aria-label": `${r.name} sentence` });
      input.dataset.lang = r.lang;
      input.dataset.name = r.name;
      return input;
    });
  }

  /** The lines as the visitor left them; none edited yet: the server's own six. */
  lines() {
    if (!this.inputs) return {};
    const lines = this.inputs.map((i) => ({ lang: i.dataset.lang, name: i.dataset.name, text: i.value }));
    if (lines.some((l) => !l.text.trim())) { this.counts.status.textContent = "every line needs some text"; return null; }
    return { lines };
  }

  drawTable(data) {
    const line = readout("Hover or tap a figure for how it was counted.");
    const table = el("table", { class: "he-table he-languages" });
    const head = el("tr");
    for (const h of ["language", "the sentence (edit it)", "tokens", `vs ${data.first}`, "characters per token", "split characters", "KV cache"]) {
      head.append(el("th", { scope: "col" }, h));
    }
    table.appendChild(el("thead")).append(head);
    const body = table.appendChild(el("tbody"));
    const most = Math.max(...data.rows.map((r) => r.tokens));
    data.rows.forEach((r, n) => {
      const tr = body.appendChild(el("tr", { "data-lang": r.lang, "data-tokens": String(r.tokens) }));
      tr.append(el("th", { scope: "row" }, r.name));
      const box = tr.appendChild(el("td", { class: "he-lang-text" }));
      box.append(this.inputs[n] ?? el("span", { dir: "auto", lang: r.lang }, r.text));
      const tokens = tr.appendChild(el("td", { class: "he-num" }));
      const bar = el("span", { class: "he-lang-bar", "aria-hidden": "true", style: `width: calc(${((4 * r.tokens) / most).toFixed(3)} * var(--r))` });
      tokens.append(bar, el("span", {}, int(r.tokens)));
      hover(tokens, `${r.name}: ${plural(r.tokens, "token")} for ${plural(r.chars, "character")} (${plural(r.utf8_bytes, "byte")} of UTF-8)`, line);
      const vs = tr.appendChild(el("td", { class: "he-num" }, ratio(r.tokens_vs_first)));
      hover(vs, `${int(r.tokens)} / ${int(data.rows[0].tokens)} tokens of ${data.first}`, line);
      tr.append(el("td", { class: "he-num" }, r.chars_per_token == null ? "–" : r.chars_per_token.toFixed(2)));
      const split = tr.appendChild(el("td", { class: "he-num" }, int(r.partial_tokens)));
      hover(split, r.partial_tokens ? `${plural(r.partial_tokens, "token")} of ${r.name} hold only part of a character's UTF-8 bytes: `
        + "the page shows them once the character is complete" : "every token of this line is whole text by itself", line);
      const kv = tr.appendChild(el("td", { class: "he-num" }, bytes(r.kv_bytes)));
      hover(kv, `${int(r.tokens)} tokens × ${int(data.kv_bytes_per_token)} bytes per token (${data.kv_formula}) = ${int(r.kv_bytes)} bytes`, line);
    });
    const scroll = el("div", { class: "he-scroll capped he-wide-table", tabindex: "0", role: "region", "aria-label": "Tokens per language (scrollable)" });
    scroll.append(table);
    this.dataset.rows = String(data.rows.length);
    this.tablePart.replaceChildren(scroll, this.words(data), this.chipsOf(data), line,
      caption(`Counted by this server's tokenizer; the KV cache is this model's ${int(data.kv_bytes_per_token)} bytes per token `
        + `(${data.kv_dtype}). Edit a line and press "Count again": the sentences are model input, never translated.`));
  }

  /** The costliest line against the first, said plainly. */
  words(data) {
    const [first, ...rest] = data.rows;
    const dearest = rest.reduce((a, b) => (b.tokens > (a?.tokens ?? -1) ? b : a), null);
    if (!dearest) return el("p", {});
    return el("p", { class: "he-callout he-lang-words" }, `${dearest.name} costs ${ratio(dearest.tokens_vs_first)} the tokens of `
      + `${first.name} here: ${int(dearest.tokens)} against ${int(first.tokens)}, so ${ratio(dearest.tokens_vs_first)} the KV cache `
      + `(${bytes(dearest.kv_bytes)} against ${bytes(first.kv_bytes)}) for the same meaning.`);
  }

  /** Each line's tokens as chips; a token holding part of a character is marked. */
  chipsOf(data) {
    const box = el("details", { class: "he-lang-chips" });
    box.open = Boolean(this.chipsOpen); // a redraw (a measurement arriving) keeps it as the reader left it
    box.addEventListener("toggle", () => { this.chipsOpen = box.open; });
    box.append(el("summary", {}, "Show each line's tokens"));
    for (const r of data.rows) {
      const list = el("ul", { class: "he-chips", "aria-label": `${r.name} tokens` });
      r.pieces.forEach((piece, i) => {
        const split = r.partial.includes(i);
        const chip = el("li", { class: `he-chip${split ? " he-split" : ""}`, dir: "auto", lang: r.lang, title: split ? `id ${r.ids[i]}: part of a character's bytes` : `id ${r.ids[i]}` });
        chip.append(el("span", { class: "he-piece" }, split ? "\u00b7\u00b7" : showPiece(piece)));
        list.append(chip);
      });
      box.append(el("p", { class: "he-col-sub" }, `${r.name}: ${plural(r.tokens, "token")}`), list);
    }
    return box;
  }

  timeWords(data) {
    const line = readout("Hover or tap a time for the line it timed.");
    const list = el("ul", { class: "he-lang-times" });
    this.dataset.timed = String(data.rows.length);
    for (const r of data.rows) {
      const item = el("li", { "data-lang": r.lang }, `${r.name}: ${ms(r.prefill_ms)} (${ratio(r.prefill_vs_first)} ${data.first}'s) for ${plural(r.tokens, "token")}`);
      hover(item, `the median of ${data.repeats} prefills of exactly these ${int(r.tokens)} tokens on this server`, line);
      list.append(item);
    }
    const box = el("div", {});
    box.append(list, line);
    return box;
  }
}

define("he-languages", HeLanguages);
