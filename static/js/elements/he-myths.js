// <he-myths>: "what did not happen": each myth answered by a check measured on this run.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { unpack } from "../lib/packed.js";
import { readout, hover, chip, int } from "../lib/widgets.js";
import { plural } from "../lib/plural.js";

const WAIT = { status: "waiting", text: "waiting for the run" };

class HeMyths extends SteppedElement {
  render(rs) {
    const line = readout("Hover or tap a row for the raw numbers.");
    const rows = [
      ["lookup", "The model looks words up in a dictionary.", lookup(rs, line)],
      ["embedding_rows_unchanged", "Reading a token changes its embedding row.", embeddingRows(rs.checks?.embedding_rows_unchanged)],
      ["causal_mask", "A token can see the words that come after it.", causal(rs.checks?.causal_mask, line)],
      ["attention_vocab", "Attention compares the query against the whole vocabulary.", attentionVocab(rs)],
      ["forward_passes", "The reply is produced in one operation.", passes(rs)],
      ["kv_window", "The KV cache enlarges the context window.", kvWindow(rs)],
      ["weights_unchanged", "The model learns from the conversation.", weights(rs.checks?.weights_unchanged)],
    ];
    const list = el("ol", { class: "he-myths" });
    const count = { pass: 0, fail: 0, waiting: 0 };
    for (const [key, myth, r] of rows) {
      count[r.status] += 1;
      const li = el("li", { class: `he-myth he-${r.status}`, "data-check": key, "data-status": r.status });
      const mark = el("span", { class: "he-myth-mark", "aria-label": r.status }, r.status === "pass" ? "✓" : r.status === "fail" ? "✗" : "…");
      const text = el("div", { class: "he-myth-text" });
      text.append(el("s", { class: "he-myth-claim" }, myth), el("p", {}, r.text));
      if (r.extra) text.append(r.extra);
      li.append(mark, text);
      hover(li, r.raw || r.text, line);
      list.append(li);
    }
    this.dataset.passed = String(count.pass);
    this.dataset.failed = String(count.fail);
    this.dataset.waiting = String(count.waiting);
    this.root.replaceChildren(list, line,
      caption(`Seven things that did not happen, each checked over the whole run (whatever step the page shows): ${count.pass} held (✓), ${count.fail} failed (✗), `
        + `${count.waiting} still waiting for data. ✓ and ✗ come from the measurements, not from this text.`));
  }
}

const verdict = (ok) => (ok ? "pass" : "fail");

function lookup(rs, line) {
  const p = rs.prefill;
  if (!p) return WAIT;
  const [V, H] = p.embeddings.shape;
  const ids = p.tokens.map((t) => t.id);
  const ok = ids.every((id) => Number.isInteger(id) && id >= 0 && id < V);
  const norms = safeUnpack(p.embeddings.norms);
  const extra = el("div", { class: "he-chips" });
  p.tokens.slice(0, 24).forEach((t, i) => {
    const c = chip(t.text, t.id, t.special ? "he-special" : "");
    hover(c, `${showPiece(t.text)}: id ${t.id} = row ${t.id} of ${V}; row norm ${norms ? fmt(norms.data[i], 3) : "–"}`, line, false);
    extra.append(c);
  });
  if (p.tokens.length > 24) extra.append(el("span", { class: "he-more" }, `+ ${int(p.tokens.length - 24)} more`));
  return { status: verdict(ok), extra,
    text: `The ${int(ids.length)} prompt ids are row numbers into a ${int(V)} × ${int(H)} embedding table: id ${ids[ids.length - 1]} is row ${ids[ids.length - 1]}. `
      + (ok ? `Every id is an index in 0–${int(V - 1)}; nothing looked up a meaning.` : "Some id is not a row index of the table."),
    raw: `ids ${ids.join(", ")}; embeddings.shape [${V}, ${H}]` };
}

function embeddingRows(check) {
  if (!check) return WAIT;
  const d = check.data || {};
  const rows = d.rows || [];
  const t = el("table", { class: "he-table he-small" });
  const hr = el("tr");
  for (const h of ["position", "id", "norm before", "norm after"]) hr.append(el("th", {}, h));
  t.append(hr);
  for (const r of rows.slice(0, 6)) {
    const tr = el("tr");
    tr.append(el("td", {}, r.position), el("td", {}, r.id), el("td", {}, fmt(r.norm_before, 6)), el("td", {}, fmt(r.norm_after, 6)));
    t.append(tr);
  }
  return { status: verdict(check.passed), extra: rows.length ? t : null,
    text: `${int(rows.length)} embedding rows read by the prompt were measured before and after the run: the largest change is ${d.max_abs_change}.`,
    raw: `embedding_rows_unchanged: passed ${check.passed}, max_abs_change ${d.max_abs_change}` };
}

function tokenOf(x) {
  if (x == null) return "?";
  return typeof x === "object" ? `${showPiece(x.text ?? "")} (id ${x.id})` : `id ${x}`;
}

function causal(check, line) {
  if (!check) return WAIT;
  const d = check.data || {};
  const changes = d.max_abs_change || [];
  const max = Math.max(1e-12, ...changes);
  // Scrolls sideways on a narrow column: focusable, so a keyboard can scroll it (axe scrollable-region-focusable).
  const bars = el("div", { class: "he-minibars", tabindex: "0", role: "group", "aria-label": "Largest change per position" });
  changes.forEach((v, i) => {
    const b = el("div", { class: `he-minibar${i < d.change_at ? " he-before" : i === d.change_at ? " he-at" : ""}` });
    b.append(el("div", { style: `height:${Math.max(v > 0 ? 4 : 0, (v / max) * 100)}%` }), el("span", {}, i));
    hover(b, `position ${i}: largest change of the final hidden state ${v}${i < d.change_at ? " (before the change)" : ""}`, line, false);
    bars.append(b);
  });
  const earlier = changes.slice(0, d.change_at);
  return { status: verdict(check.passed), extra: changes.length ? bars : null,
    text: `Changing the token at position ${d.change_at} from ${tokenOf(d.original)} to ${tokenOf(d.replacement)}: `
      + `positions 0–${d.change_at - 1} moved by at most ${earlier.length ? Math.max(...earlier) : "–"} (${d.earlier_unchanged ? "exactly unchanged" : "they changed"}), `
      + `later positions by up to ${fmt(Math.max(0, ...changes.slice(d.change_at)), 4)}.`,
    raw: `causal_mask: change_at ${d.change_at}, max_abs_change [${changes.join(", ")}]` };
}

function attentionVocab(rs) {
  const s = rs.lastStep;
  if (!s) return WAIT;
  const ok = s.attention.keys === s.kv.seq_len;
  return { status: verdict(ok),
    text: `At step ${s.step} the new query was compared with ${plural(s.attention.keys, "key")}, one per cached position (the cache held ${int(s.kv.seq_len)}), `
      + `not with the ${int(s.logits.vocab_size)} vocabulary entries; only the LM head scores the vocabulary.`,
    raw: `attention.keys ${s.attention.keys}, kv.seq_len ${s.kv.seq_len}, logits.vocab_size ${s.logits.vocab_size}` };
}

function passes(rs) {
  const n = rs.steps.length;
  if (!rs.prefill || !n) return WAIT;
  const decode = rs.steps.filter((s) => s.forward === "decode");
  const ok = decode.length + 1 === n;
  const ms = decode.reduce((a, s) => a + (s.timing?.forward_ms || 0), 0);
  const cached = rs.prefill.cached_tokens ?? 0;
  return { status: verdict(ok),
    text: `${plural(n, "token")} took ${plural(decode.length + 1, "forward pass", "forward passes")}: 1 prefill over ${plural(rs.prefill.tokens.length - cached, "position")} `
      + (cached ? `(the first ${cached} of ${rs.prefill.tokens.length} came from the prefix cache) ` : "")
      + `(${fmt(rs.prefill.timing?.forward_ms, 1)} ms) + ${int(decode.length)} decode passes of one position each (${fmt(ms, 1)} ms in all).`,
    raw: `steps ${n}; forward: ${rs.steps.map((s) => s.forward).join(", ")}` };
}

function kvWindow(rs) {
  const kvs = [rs.prefill?.kv, ...rs.steps.map((s) => s.kv)].filter(Boolean);
  if (!kvs.length) return WAIT;
  const windows = new Set(kvs.map((k) => k.context_window));
  const model = rs.session?.model?.context_window;
  const ok = windows.size === 1 && kvs.every((k) => k.seq_len <= k.context_window) && (model == null || windows.has(model));
  const first = kvs[0], lastKv = kvs[kvs.length - 1];
  return { status: verdict(ok),
    text: `The cache grew from ${int(first.seq_len)} to ${plural(lastKv.seq_len, "position")} (${int(first.bytes)} → ${int(lastKv.bytes)} bytes); `
      + `the context window stayed ${[...windows].map(int).join(" / ")} in all ${int(kvs.length)} payloads, and every seq_len stayed within it.`,
    raw: `seq_len ${kvs.map((k) => k.seq_len).join(", ")}; context_window ${[...windows].join(", ")}` };
}

function weights(check) {
  if (!check) return WAIT;
  const d = check.data || {};
  return { status: verdict(check.passed),
    text: `A checksum over ${plural(d.parameters, "parameter")}: ${d.checksum_before} before the run, ${d.checksum_after} after. `
      + (check.passed ? "No weight was updated." : "The weights changed."),
    raw: `weights_unchanged: passed ${check.passed}, checksum_before ${d.checksum_before}, checksum_after ${d.checksum_after}` };
}

function safeUnpack(p) { try { return unpack(p); } catch { return null; } }

define("he-myths", HeMyths);
