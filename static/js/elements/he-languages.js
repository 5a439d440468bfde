// <he-languages>: what a language costs (issue 28). One meaning in six languages, each line editable, read by this
// server's own tokenizer: the tokens each takes, characters per token, characters whose bytes the tokenizer
// split over several tokens, the KV cache those tokens hold on this model, and on request each line's prefill
// timed on this server; every figure beside English's, in words too. Nothing here is translated: each line is
// model input, shown as typed (dir="auto": Arabic reads right to left).
import { SteppedElement, define, el, caption, bytes, showPiece } from "../lib/base-element.js";
import { readout, hover, int } from "../lib/widgets.js";
import { Measure, ms } from "../lib/measure.js";
import { decimal, fill, gettext, grouped, language, ngettext } from "../lib/i18n.js";

/** A language's name in the reader's language (Intl.DisplayNames: "français" on a French page), else the server's. */
function nameOf(row) {
  try { return new Intl.DisplayNames([language()], { type: "language" }).of(row.lang) || row.name; } catch { return row.name; }
}

const ratio = (x) => (x == null ? "–" : `${decimal(x, x >= 10 ? 0 : 1)}×`);
/** A counted phrase (ngettext's choice for `n`) with `n` and `values` filled in: "1 token", "12 tokens". */
const counted = (text, n, values = {}) => fill(text, { ...values, n: n == null ? "–" : grouped(n) });

class HeLanguages extends SteppedElement {
  render(rs) {
    this.counts ??= new Measure(this, "languages", { label: gettext("Count again"), fields: ["lines"], extra: () => this.lines() });
    this.timing ??= new Measure(this, "languages_prefill", { label: gettext("Time each prefill on this server"), fields: ["lines"], extra: () => this.lines() });
    if (!this.tablePart) {
      this.tablePart = el("div", { class: "he-part" });
      this.timePart = el("div", { class: "he-part" });
      this.root.replaceChildren(this.counts.node, this.tablePart, this.timing.node, this.timePart);
    }
    const counted = this.counts.sync(rs);
    const timed = this.timing.sync(rs);
    if (!counted.data) {
      this.tablePart.replaceChildren(this.counts.placeholder(counted, gettext("The server reads one sentence in six languages with its tokenizer.")));
      this.timePart.replaceChildren();
      return;
    }
    this.inputs ??= this.makeInputs(counted.data.rows);
    this.drawTable(counted.data);
    this.timePart.replaceChildren(...(timed.data ? [this.timeWords(timed.data)] : [this.timing.placeholder(timed,
      gettext("Press the button: the server times each line's prefill (the median of 3), as the queue allows."))]));
  }

  /** An editable box per line, kept across redraws (the visitor's edits are what "Count again" sends). */
  makeInputs(rows) {
    return rows.map((r) => {
      const input = el("input", { type: "text", value: r.text, lang: r.lang, dir: "auto", maxlength: "400", "aria-label": fill(gettext("%(language)s sentence"), { language: nameOf(r) }) });
      input.dataset.lang = r.lang;
      input.dataset.name = r.name;
      return input;
    });
  }

  /** The lines as the visitor left them; none edited yet: the server's own six. */
  lines() {
    if (!this.inputs) return {};
    const lines = this.inputs.map((i) => ({ lang: i.dataset.lang, name: i.dataset.name, text: i.value }));
    if (lines.some((l) => !l.text.trim())) { this.counts.status.textContent = gettext("every line needs some text"); return null; }
    return { lines };
  }

  drawTable(data) {
    const line = readout(gettext("Hover or tap a figure for how it was counted."));
    const table = el("table", { class: "he-table he-languages" });
    const head = el("tr");
    for (const h of [gettext("language"), gettext("the sentence (edit it)"), gettext("tokens"), fill(gettext("vs %(language)s"), { language: nameOf(data.rows[0]) }),
      gettext("characters per token"), gettext("split characters"), gettext("KV cache")]) {
      head.append(el("th", { scope: "col" }, h));
    }
    table.appendChild(el("thead")).append(head);
    const body = table.appendChild(el("tbody"));
    const most = Math.max(...data.rows.map((r) => r.tokens));
    data.rows.forEach((r, n) => {
      const tr = body.appendChild(el("tr", { "data-lang": r.lang, "data-tokens": String(r.tokens) }));
      tr.append(el("th", { scope: "row" }, nameOf(r)));
      const box = tr.appendChild(el("td", { class: "he-lang-text" }));
      box.append(this.inputs[n] ?? el("span", { dir: "auto", lang: r.lang }, r.text));
      const tokens = tr.appendChild(el("td", { class: "he-num" }));
      const bar = el("span", { class: "he-lang-bar", "aria-hidden": "true", style: `width: calc(${((4 * r.tokens) / most).toFixed(3)} * var(--r))` });
      tokens.append(bar, el("span", {}, int(r.tokens)));
      hover(tokens, fill(gettext("%(language)s: %(tokens)s for %(characters)s (%(bytes)s of UTF-8)"), { language: nameOf(r),
        tokens: counted(ngettext("%(n)s token", "%(n)s tokens", r.tokens), r.tokens),
        characters: counted(ngettext("%(n)s character", "%(n)s characters", r.chars), r.chars),
        bytes: counted(ngettext("%(n)s byte", "%(n)s bytes", r.utf8_bytes), r.utf8_bytes) }), line);
      const vs = tr.appendChild(el("td", { class: "he-num" }, ratio(r.tokens_vs_first)));
      hover(vs, fill(gettext("%(tokens)s / %(first)s tokens of %(language)s"), { tokens: int(r.tokens), first: int(data.rows[0].tokens), language: nameOf(data.rows[0]) }), line);
      tr.append(el("td", { class: "he-num" }, r.chars_per_token == null ? "–" : decimal(r.chars_per_token, 2)));
      const split = tr.appendChild(el("td", { class: "he-num" }, int(r.partial_tokens)));
      hover(split, r.partial_tokens ? counted(ngettext("%(n)s token of %(language)s hold only part of a character's UTF-8 bytes: "
        + "the page shows them once the character is complete", "%(n)s tokens of %(language)s hold only part of a character's UTF-8 bytes: "
        + "the page shows them once the character is complete", r.partial_tokens), r.partial_tokens, { language: nameOf(r) })
        : gettext("every token of this line is whole text by itself"), line);
      const kv = tr.appendChild(el("td", { class: "he-num" }, bytes(r.kv_bytes)));
      hover(kv, fill(gettext("%(tokens)s tokens × %(per_token)s bytes per token (%(formula)s) = %(bytes)s bytes"),
        { tokens: int(r.tokens), per_token: int(data.kv_bytes_per_token), formula: data.kv_formula, bytes: int(r.kv_bytes) }), line);
    });
    const scroll = el("div", { class: "he-scroll capped he-wide-table", tabindex: "0", role: "region", "aria-label": gettext("Tokens per language (scrollable)") });
    scroll.append(table);
    this.dataset.rows = String(data.rows.length);
    this.tablePart.replaceChildren(scroll, this.words(data), this.chipsOf(data), line,
      caption(fill(gettext("Counted by this server's tokenizer; the KV cache is this model's %(per_token)s bytes per token "
        + "(%(dtype)s). Edit a line and press \"Count again\": the sentences are model input, never translated."),
      { per_token: int(data.kv_bytes_per_token), dtype: data.kv_dtype })));
  }

  /** The costliest line against the first, said plainly. */
  words(data) {
    const [first, ...rest] = data.rows;
    const dearest = rest.reduce((a, b) => (b.tokens > (a?.tokens ?? -1) ? b : a), null);
    if (!dearest) return el("p", {});
    return el("p", { class: "he-callout he-lang-words" }, fill(gettext("%(language)s costs %(ratio)s the tokens of "
      + "%(first)s here: %(tokens)s against %(first_tokens)s, so %(ratio)s the KV cache "
      + "(%(bytes)s against %(first_bytes)s) for the same meaning."), { language: nameOf(dearest), ratio: ratio(dearest.tokens_vs_first),
      first: nameOf(first), tokens: int(dearest.tokens), first_tokens: int(first.tokens), bytes: bytes(dearest.kv_bytes), first_bytes: bytes(first.kv_bytes) }));
  }

  /** Each line's tokens as chips; a token holding part of a character is marked. */
  chipsOf(data) {
    const box = el("details", { class: "he-lang-chips" });
    box.open = Boolean(this.chipsOpen); // a redraw (a measurement arriving) keeps it as the reader left it
    box.addEventListener("toggle", () => { this.chipsOpen = box.open; });
    box.append(el("summary", {}, gettext("Show each line's tokens")));
    for (const r of data.rows) {
      const list = el("ul", { class: "he-chips", "aria-label": fill(gettext("%(language)s tokens"), { language: nameOf(r) }) });
      r.pieces.forEach((piece, i) => {
        const split = r.partial.includes(i);
        const chip = el("li", { class: `he-chip${split ? " he-split" : ""}`, dir: "auto", lang: r.lang, title: split ? fill(gettext("id %(id)s: part of a character's bytes"), { id: r.ids[i] }) : `id ${r.ids[i]}` });
        chip.append(el("span", { class: "he-piece" }, split ? "\u00b7\u00b7" : showPiece(piece)));
        list.append(chip);
      });
      box.append(el("p", { class: "he-col-sub" }, counted(ngettext("%(language)s: %(n)s token", "%(language)s: %(n)s tokens", r.tokens), r.tokens, { language: nameOf(r) })), list);
    }
    return box;
  }

  timeWords(data) {
    const line = readout(gettext("Hover or tap a time for the line it timed."));
    const list = el("ul", { class: "he-lang-times" });
    this.dataset.timed = String(data.rows.length);
    for (const r of data.rows) {
      const item = el("li", { "data-lang": r.lang }, counted(ngettext("%(language)s: %(time)s (%(ratio)s %(first)s's) for %(n)s token",
        "%(language)s: %(time)s (%(ratio)s %(first)s's) for %(n)s tokens", r.tokens), r.tokens,
      { language: nameOf(r), time: ms(r.prefill_ms), ratio: ratio(r.prefill_vs_first), first: nameOf(data.rows[0]) }));
      hover(item, fill(gettext("the median of %(repeats)s prefills of exactly these %(tokens)s tokens on this server"),
        { repeats: data.repeats, tokens: int(r.tokens) }), line);
      list.append(item);
    }
    const box = el("div", {});
    box.append(list, line);
    return box;
  }
}

define("he-languages", HeLanguages);
