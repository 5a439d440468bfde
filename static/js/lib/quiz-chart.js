// The class quiz's chart (issue 26), shared by the host's page and every follower's: each candidate token with
// the class's count beside it and, once revealed, the model's probability and the token the dice drew.
// Everything from the server is drawn as text.
import { el, showPiece } from "./base-element.js";
import { pct } from "./widgets.js";
import { fill, gettext } from "./i18n.js";

/** A candidate as the reader sees it: its piece with spaces made visible, or what a special token means. */
export function tokenLabel(token) {
  return token.special ? `\u27e8${gettext("end of reply")}\u27e9` : `\u201c${showPiece(token.text ?? "")}\u201d`;
}

/** The rows to draw: the candidates (by the model's odds once revealed, else in the order shown), then typed
 * tokens outside them; each with its count. */
function rowsOf(quiz) {
  const counts = quiz.counts || quiz.outcome?.counts || {};
  const revealed = quiz.outcome?.candidates;
  const rows = (revealed || quiz.candidates).map((c) => ({ ...c, count: counts[String(c.key)] ?? 0 }));
  if (revealed) rows.sort((a, b) => (b.model_prob ?? -1) - (a.model_prob ?? -1));
  const others = (quiz.outcome?.others || quiz.others || []).map((o) => ({ ...o, key: null, typed: true }));
  return rows.concat(others);
}

function bar(fraction, cls) {
  const track = el("span", { class: `quiz-bar ${cls}`, "aria-hidden": "true" });
  track.append(el("span", { style: `width: ${Math.round(Math.max(0, Math.min(1, fraction)) * 100)}%` }));
  return track;
}

/** The table: token, the class's count, and (revealed) the model's probability; `mine` marks the reader's answer.
 * For one learner (`audience` "you", guess mode) there is no class column: their pick is marked in the rows. */
export function quizTable(quiz, mine = null, audience = "class") {
  const outcome = quiz.outcome || null;
  const answered = quiz.answered ?? outcome?.answered ?? 0;
  const table = el("table", { class: "quiz-table" });
  const alone = audience === "you";
  table.append(el("caption", {}, alone ? gettext("Your pick beside the model's probabilities") : outcome
    ? fill(gettext("The class's answers (%(count)s) beside the model's probabilities"), { count: answered })
    : fill(gettext("The class's answers so far: %(count)s"), { count: answered })));
  const head = el("tr");
  const columns = [gettext("Token"), ...(alone ? [] : [gettext("The class")]), ...(outcome ? [gettext("The model")] : [])];
  for (const name of columns) head.append(el("th", { scope: "col" }, name));
  table.appendChild(el("thead")).append(head);
  const body = table.appendChild(el("tbody"));
  for (const row of rowsOf(quiz)) {
    const tr = body.appendChild(el("tr", { "data-key": row.key ?? "typed" }));
    const marks = [];
    if (outcome && row.id === outcome.token.id) { tr.classList.add("quiz-drawn"); marks.push(gettext("drawn")); }
    if (mine != null && (row.key === mine.key && row.key != null || row.typed && row.id === mine.token?.id)) {
      tr.classList.add("quiz-mine");
      marks.push(gettext("your answer"));
    }
    const name = tr.appendChild(el("th", { scope: "row" }));
    name.append(el("span", { class: "quiz-token" }, tokenLabel(row)));
    if (row.typed) name.append(el("small", {}, ` ${gettext("typed")}`));
    for (const mark of marks) name.append(el("span", { class: "quiz-mark" }, mark));
    if (!alone) {
      const count = tr.appendChild(el("td", { class: "quiz-count" }));
      count.append(bar(answered ? row.count / answered : 0, "class"), el("span", {}, fill(gettext("%(count)s of %(answered)s"), { count: row.count, answered })));
    }
    if (outcome) {
      const model = tr.appendChild(el("td", { class: "quiz-model" }));
      const p = row.model_prob;
      model.append(bar(p ?? 0, "model"), el("span", {}, p == null
        ? fill(gettext("below the top %(listed)s (< %(p)s)"), { listed: outcome.listed, p: pct(outcome.below_listed) })
        : fill(gettext("%(p)s (rank %(rank)s)"), { p: pct(p), rank: row.rank })));
    }
  }
  return table;
}

/** What the reveal shows, in words: the model's favourite and how many picked it, then what the dice drew. */
export function revealLines(quiz) {
  const o = quiz.outcome;
  const rows = rowsOf(quiz).filter((r) => !r.typed);
  const top = rows[0];
  const answered = o.answered ?? 0;
  const lines = [answered
    ? fill(gettext("The model gave %(token)s %(p)s: %(count)s of %(answered)s of you picked it."),
      { token: tokenLabel(top), p: pct(top.model_prob), count: top.count, answered })
    : fill(gettext("The model gave %(token)s %(p)s; nobody answered."), { token: tokenLabel(top), p: pct(top.model_prob) })];
  const popular = rows.reduce((best, r) => (r.count > best.count ? r : best), rows[0]);
  if (answered && popular.id !== top.id && popular.count > top.count) {
    lines.push(fill(gettext("Most of you (%(count)s) picked %(token)s: the model gave it %(p)s."),
      { count: popular.count, token: tokenLabel(popular), p: pct(popular.model_prob) }));
  }
  const drawn = rows.find((r) => r.id === o.token.id) || { ...o.token, rank: null };
  if (o.greedy) lines.push(fill(gettext("At temperature 0 the model takes its top token: %(token)s."), { token: tokenLabel(drawn) }));
  else {
    const where = drawn.rank === 1 ? gettext("its top choice") : drawn.rank
      ? fill(gettext("its choice ranked %(rank)s"), { rank: drawn.rank }) : gettext("a token below its top 10");
    lines.push(fill(gettext("The dice (u = %(u)s) drew %(token)s, %(where)s, from the sampling distribution (%(p)s after the sampling settings)."),
      { u: o.u.toFixed(3), token: tokenLabel(drawn), where, p: pct(o.token.prob) }));
  }
  const matched = rows.find((r) => r.id === o.token.id)?.count ?? 0;
  if (answered && drawn.id !== top.id) {
    lines.push(matched ? fill(gettext("%(count)s of %(answered)s of you picked the drawn token."), { count: matched, answered })
      : gettext("None of you picked the drawn token."));
  }
  return lines;
}

/** A learner's question from a step the page holds (guess mode): the model's top 8 by raw logit and 2 from lower
 * down, the drawn token always among them, shuffled (the same rule as the class quiz's server side). */
export function candidatesOf(step, eosIds = new Set()) {
  const ranked = step.logits.top;
  let lower = ranked.slice(8);
  const drawn = step.token;
  if (!ranked.slice(0, 8).some((t) => t.id === drawn.id)) {
    lower = [lower.find((t) => t.id === drawn.id) || drawn, ...lower.filter((t) => t.id !== drawn.id)];
  }
  const chosen = [...ranked.slice(0, 8), ...lower.slice(0, 2)];
  for (let i = chosen.length - 1; i > 0; i--) { // Fisher–Yates: the order shown gives no rank away
    const j = Math.floor(Math.random() * (i + 1));
    [chosen[i], chosen[j]] = [chosen[j], chosen[i]];
  }
  return chosen.map((t, key) => ({ key, id: t.id, text: t.text, special: eosIds.has(t.id) || Boolean(t.special) }));
}

/** The reveal of a held step for one learner: the same shape as the class quiz's `outcome`. */
export function outcomeOf(step, candidates, pickedKey) {
  const raw = new Map(step.logits.top.map((t, i) => [t.id, { rank: i + 1, prob: t.prob }]));
  const final = new Map((step.probs || []).map((t) => [t.id, t.prob]));
  return {
    step: step.step, token: step.token, u: step.draw?.u ?? null, greedy: step.greedy,
    candidates: candidates.map((c) => ({ ...c, rank: raw.get(c.id)?.rank ?? null, model_prob: raw.get(c.id)?.prob ?? null,
      final_prob: final.get(c.id) ?? null })),
    listed: step.logits.top.length, below_listed: Math.min(...step.logits.top.map((t) => t.prob)),
    answered: pickedKey == null ? 0 : 1, counts: pickedKey == null ? {} : { [pickedKey]: 1 }, others: [],
  };
}
