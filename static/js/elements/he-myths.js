// <he-myths>: "what did not happen": each myth answered by a check measured on this run.
import { SteppedElement, define, el, caption, showPiece, fmt } from "../lib/base-element.js";
import { unpack } from "../lib/packed.js";
import { readout, hover, chip, int } from "../lib/widgets.js";
import { fill, gettext, grouped, ngettext } from "../lib/i18n.js";

const wait = () => ({ status: "waiting", text: gettext("waiting for the run") });
/** A counted phrase (ngettext's choice for `n`) with `n` and `values` filled in: "1 key", "12 keys". */
const counted = (text, n, values = {}) => fill(text, { ...values, n: n == null || !Number.isFinite(Number(n)) ? "–" : grouped(n) });

class HeMyths extends SteppedElement {
  render(rs) {
    const line = readout(gettext("Hover or tap a row for the raw numbers."));
    const rows = [
      ["lookup", gettext("The model looks words up in a dictionary."), lookup(rs, line)],
      ["embedding_rows_unchanged", gettext("Reading a token changes its embedding row."), embeddingRows(rs.checks?.embedding_rows_unchanged)],
      ["causal_mask", gettext("A token can see the words that come after it."), causal(rs.checks?.causal_mask, line)],
      ["attention_vocab", gettext("Attention compares the query against the whole vocabulary."), attentionVocab(rs)],
      ["forward_passes", gettext("The reply is produced in one operation."), passes(rs)],
      ["kv_window", gettext("The KV cache enlarges the context window."), kvWindow(rs)],
      ["weights_unchanged", gettext("The model learns from the conversation."), weights(rs.checks?.weights_unchanged)],
    ];
    const said = { pass: gettext("pass"), fail: gettext("fail"), waiting: gettext("waiting") }; // each mark's spoken name
    const list = el("ol", { class: "he-myths" });
    const count = { pass: 0, fail: 0, waiting: 0 };
    for (const [key, myth, r] of rows) {
      count[r.status] += 1;
      const li = el("li", { class: `he-myth he-${r.status}`, "data-check": key, "data-status": r.status });
      const mark = el("span", { class: "he-myth-mark", "aria-label": said[r.status] }, r.status === "pass" ? "✓" : r.status === "fail" ? "✗" : "…");
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
      caption(fill(gettext("Seven things that did not happen, each checked over the whole run (whatever step the page shows): %(passed)s held (✓), %(failed)s failed (✗), "
        + "%(waiting)s still waiting for data. ✓ and ✗ come from the measurements, not from this text."), { passed: count.pass, failed: count.fail, waiting: count.waiting })));
  }
}

const verdict = (ok) => (ok ? "pass" : "fail");

function lookup(rs, line) {
  const p = rs.prefill;
  if (!p) return wait();
  const [V, H] = p.embeddings.shape;
  const ids = p.tokens.map((t) => t.id);
  const ok = ids.every((id) => Number.isInteger(id) && id >= 0 && id < V);
  const norms = safeUnpack(p.embeddings.norms);
  const extra = el("div", { class: "he-chips" });
  p.tokens.slice(0, 24).forEach((t, i) => {
    const c = chip(t.text, t.id, t.special ? "he-special" : "");
    hover(c, fill(gettext("%(token)s: id %(id)s = row %(id)s of %(rows)s; row norm %(norm)s"),
      { token: showPiece(t.text), id: t.id, rows: V, norm: norms ? fmt(norms.data[i], 3) : "–" }), line, false);
    extra.append(c);
  });
  if (p.tokens.length > 24) extra.append(el("span", { class: "he-more" }, fill(gettext("+ %(n)s more"), { n: int(p.tokens.length - 24) })));
  return { status: verdict(ok), extra,
    text: `${fill(gettext("The %(count)s prompt ids are row numbers into a %(rows)s × %(width)s embedding table: id %(id)s is row %(id)s."),
      { count: int(ids.length), rows: int(V), width: int(H), id: String(ids[ids.length - 1]) })} `
      + (ok ? fill(gettext("Every id is an index in 0–%(last)s; nothing looked up a meaning."), { last: int(V - 1) }) : gettext("Some id is not a row index of the table.")),
    raw: `ids ${ids.join(", ")}; embeddings.shape [${V}, ${H}]` };
}

function embeddingRows(check) {
  if (!check) return wait();
  const d = check.data || {};
  const rows = d.rows || [];
  const t = el("table", { class: "he-table he-small" });
  const hr = el("tr");
  for (const h of [gettext("position"), gettext("id"), gettext("norm before"), gettext("norm after")]) hr.append(el("th", {}, h));
  t.append(hr);
  for (const r of rows.slice(0, 6)) {
    const tr = el("tr");
    tr.append(el("td", {}, r.position), el("td", {}, r.id), el("td", {}, fmt(r.norm_before, 6)), el("td", {}, fmt(r.norm_after, 6)));
    t.append(tr);
  }
  return { status: verdict(check.passed), extra: rows.length ? t : null,
    text: fill(gettext("%(count)s embedding rows read by the prompt were measured before and after the run: the largest change is %(change)s."),
      { count: int(rows.length), change: String(d.max_abs_change) }),
    raw: `embedding_rows_unchanged: passed ${check.passed}, max_abs_change ${d.max_abs_change}` };
}

function tokenOf(x) {
  if (x == null) return "?";
  return typeof x === "object" ? `${showPiece(x.text ?? "")} (id ${x.id})` : `id ${x}`;
}

function causal(check, line) {
  if (!check) return wait();
  const d = check.data || {};
  const changes = d.max_abs_change || [];
  const max = Math.max(1e-12, ...changes);
  // Scrolls sideways on a narrow column: focusable, so a keyboard can scroll it (axe scrollable-region-focusable).
  const bars = el("div", { class: "he-minibars", tabindex: "0", role: "group", "aria-label": gettext("Largest change per position") });
  changes.forEach((v, i) => {
    const b = el("div", { class: `he-minibar${i < d.change_at ? " he-before" : i === d.change_at ? " he-at" : ""}` });
    b.append(el("div", { style: `height:${Math.max(v > 0 ? 4 : 0, (v / max) * 100)}%` }), el("span", {}, i));
    hover(b, fill(i < d.change_at ? gettext("position %(position)s: largest change of the final hidden state %(change)s (before the change)")
      : gettext("position %(position)s: largest change of the final hidden state %(change)s"), { position: i, change: String(v) }), line, false);
    bars.append(b);
  });
  const earlier = changes.slice(0, d.change_at);
  return { status: verdict(check.passed), extra: changes.length ? bars : null,
    text: fill(d.earlier_unchanged
      ? gettext("Changing the token at position %(position)s from %(original)s to %(replacement)s: "
        + "positions 0–%(last)s moved by at most %(earlier)s (exactly unchanged), later positions by up to %(later)s.")
      : gettext("Changing the token at position %(position)s from %(original)s to %(replacement)s: "
        + "positions 0–%(last)s moved by at most %(earlier)s (they changed), later positions by up to %(later)s."),
    { position: String(d.change_at), original: tokenOf(d.original), replacement: tokenOf(d.replacement), last: String(d.change_at - 1),
      earlier: earlier.length ? String(Math.max(...earlier)) : "–", later: fmt(Math.max(0, ...changes.slice(d.change_at)), 4) }),
    raw: `causal_mask: change_at ${d.change_at}, max_abs_change [${changes.join(", ")}]` };
}

function attentionVocab(rs) {
  const s = rs.lastStep;
  if (!s) return wait();
  const ok = s.attention.keys === s.kv.seq_len;
  return { status: verdict(ok),
    text: counted(ngettext("At step %(step)s the new query was compared with %(n)s key, one per cached position (the cache held %(cached)s), "
      + "not with the %(vocab)s vocabulary entries; only the LM head scores the vocabulary.",
    "At step %(step)s the new query was compared with %(n)s keys, one per cached position (the cache held %(cached)s), "
      + "not with the %(vocab)s vocabulary entries; only the LM head scores the vocabulary.", s.attention.keys), s.attention.keys,
    { step: s.step, cached: int(s.kv.seq_len), vocab: int(s.logits.vocab_size) }),
    raw: `attention.keys ${s.attention.keys}, kv.seq_len ${s.kv.seq_len}, logits.vocab_size ${s.logits.vocab_size}` };
}

function passes(rs) {
  const n = rs.steps.length;
  if (!rs.prefill || !n) return wait();
  const decode = rs.steps.filter((s) => s.forward === "decode");
  const ok = decode.length + 1 === n;
  const ms = decode.reduce((a, s) => a + (s.timing?.forward_ms || 0), 0);
  const cached = rs.prefill.cached_tokens ?? 0;
  return { status: verdict(ok),
    text: fill(cached
      ? gettext("%(tokens)s took %(passes)s: 1 prefill over %(positions)s (the first %(cached)s of %(total)s came from the prefix cache) "
        + "(%(prefill_ms)s ms) + %(decodes)s decode passes of one position each (%(decode_ms)s ms in all).")
      : gettext("%(tokens)s took %(passes)s: 1 prefill over %(positions)s "
        + "(%(prefill_ms)s ms) + %(decodes)s decode passes of one position each (%(decode_ms)s ms in all)."), {
      tokens: counted(ngettext("%(n)s token", "%(n)s tokens", n), n),
      passes: counted(ngettext("%(n)s forward pass", "%(n)s forward passes", decode.length + 1), decode.length + 1),
      positions: counted(ngettext("%(n)s position", "%(n)s positions", rs.prefill.tokens.length - cached), rs.prefill.tokens.length - cached),
      cached, total: rs.prefill.tokens.length, prefill_ms: fmt(rs.prefill.timing?.forward_ms, 1), decodes: int(decode.length), decode_ms: fmt(ms, 1) }),
    raw: `steps ${n}; forward: ${rs.steps.map((s) => s.forward).join(", ")}` };
}

function kvWindow(rs) {
  const kvs = [rs.prefill?.kv, ...rs.steps.map((s) => s.kv)].filter(Boolean);
  if (!kvs.length) return wait();
  const windows = new Set(kvs.map((k) => k.context_window));
  const model = rs.session?.model?.context_window;
  const ok = windows.size === 1 && kvs.every((k) => k.seq_len <= k.context_window) && (model == null || windows.has(model));
  const first = kvs[0], lastKv = kvs[kvs.length - 1];
  return { status: verdict(ok),
    text: counted(ngettext("The cache grew from %(from)s to %(n)s position (%(from_bytes)s → %(bytes)s bytes); "
      + "the context window stayed %(window)s in all %(payloads)s payloads, and every seq_len stayed within it.",
    "The cache grew from %(from)s to %(n)s positions (%(from_bytes)s → %(bytes)s bytes); "
      + "the context window stayed %(window)s in all %(payloads)s payloads, and every seq_len stayed within it.", lastKv.seq_len), lastKv.seq_len,
    { from: int(first.seq_len), from_bytes: int(first.bytes), bytes: int(lastKv.bytes), window: [...windows].map(int).join(" / "), payloads: int(kvs.length) }),
    raw: `seq_len ${kvs.map((k) => k.seq_len).join(", ")}; context_window ${[...windows].join(", ")}` };
}

function weights(check) {
  if (!check) return wait();
  const d = check.data || {};
  return { status: verdict(check.passed),
    text: `${counted(ngettext("A checksum over %(n)s parameter: %(before)s before the run, %(after)s after.",
      "A checksum over %(n)s parameters: %(before)s before the run, %(after)s after.", d.parameters), d.parameters,
    { before: String(d.checksum_before), after: String(d.checksum_after) })} `
      + (check.passed ? gettext("No weight was updated.") : gettext("The weights changed.")),
    raw: `weights_unchanged: passed ${check.passed}, checksum_before ${d.checksum_before}, checksum_after ${d.checksum_after}` };
}

function safeUnpack(p) { try { return unpack(p); } catch { return null; } }

define("he-myths", HeMyths);
