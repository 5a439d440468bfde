// What <he-attention> draws for the prompt: the head shown first and the matrix of a (layer, head): every
// weight where the prefill or a detail carries them, else block averages labelled by disjoint token ranges.
import { unpack, at } from "./packed.js";
import { fill, gettext, gettext_noop } from "./i18n.js";

export const FULL_TOKENS = 64; // the server's FULL_MATRIX_TOKENS (inference/wire/builders.py): drawn in full
export const FIRST_TOKEN_RULE = gettext_noop("the head that looks least at the first token");

const cache = new WeakMap();
/** A packed array decoded once per payload object. */
export const decode = (p) => { if (!p) return null; if (!cache.has(p)) cache.set(p, unpack(p)); return cache.get(p); };

const chosen = new WeakMap();
/** The server's choice (attention.default), else the same rule on what an older recording carries (once per payload). */
export function defaultHead(A) {
  if (A.default) return A.default;
  if (!chosen.has(A)) chosen.set(A, ruleOnRecording(A));
  return chosen.get(A);
}

/** FIRST_TOKEN_RULE over every head's full matrix, or over the blocks' first column (a summary recording). */
function ruleOnRecording(A) {
  const full = A.mode === "full";
  const data = decode(full ? A.full : A.blocks);
  if (!data) return null;
  const [layers, heads, rows] = data.shape;
  const rule = full ? FIRST_TOKEN_RULE : gettext_noop("the head that looks least at the first block of tokens");
  let best = { layer: 0, head: 0, rule, first_token_weight: 1 };
  if (rows < 2) return best;
  best.first_token_weight = Infinity;
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < heads; h++) {
      let sum = 0;
      for (let r = 1; r < rows; r++) sum += at(data, l, h, r, 0);
      if (sum / (rows - 1) < best.first_token_weight) best = { layer: l, head: h, rule, first_token_weight: sum / (rows - 1) };
    }
  }
  return best;
}

/** Block b covers tokens [edges[b], edges[b+1]): the prefill's block_edges, else the server's formula. */
function edgesOf(A, P, B) {
  if (Array.isArray(A.block_edges) && A.block_edges.length === B + 1) return A.block_edges;
  return [...Array.from({ length: B }, (_, b) => Math.floor((b * P) / B)), P];
}

/** The full P x P matrix of (L, H) if any payload carries it: {weight, source} or null. */
function fullMatrix(A, detail, L, H) {
  if (A.mode === "full") { const f = decode(A.full); return { weight: (r, c) => at(f, L, H, r, c), source: "sent" }; }
  const d = A.default;
  if (d?.full && d.layer === L && d.head === H) { const f = decode(d.full); return { weight: (r, c) => at(f, r, c), source: "default" }; }
  if (detail) { const f = decode(detail.data); return { weight: (r, c) => at(f, r, c), source: "detail" }; }
  return null;
}

const NOTES = {
  sent: gettext_noop("every weight, as sent with the prefill"),
  default: gettext_noop("every weight of the head shown first, sent with the prefill"),
  detail: gettext_noop("the full matrix, fetched on request"),
};

/**
 * The prompt's matrix for (L, H): {blocks, weight(r, c), labels, title(i), masked(r, c), note}.
 * Full: one label per token (its text); blocks: "a–b" inclusive ranges, disjoint, and a block is masked when
 * every key in it comes after every query of its row.
 */
export function prefillMatrix(A, tokens, detail, L, H, showPiece) {
  const P = tokens.length, q = (t) => JSON.stringify(t?.text ?? "");
  const full = fullMatrix(A, detail, L, H);
  if (full) {
    return { blocks: false, weight: full.weight, labels: tokens.map((t) => showPiece(t.text)), note: gettext(NOTES[full.source]),
      title: (i) => fill(gettext("position %(position)s %(text)s"), { position: i, text: q(tokens[i]) }), masked: (r, c) => c > r, source: full.source };
  }
  const blocks = decode(A.blocks);
  const B = blocks.shape[2], edges = edgesOf(A, P, B);
  const range = (i) => (edges[i] === edges[i + 1] - 1 ? `${edges[i]}` : `${edges[i]}–${edges[i + 1] - 1}`);
  return { blocks: true, weight: (r, c) => at(blocks, L, H, r, c), labels: Array.from({ length: B }, (_, i) => range(i)),
    title: (i) => fill(gettext("block %(block)s ≈ positions %(range)s (%(text)s…)"), { block: i, range: range(i), text: q(tokens[edges[i]]) }), masked: (r, c) => edges[c] > edges[r + 1] - 1,
    note: fill(P > FULL_TOKENS ? gettext("%(blocks)s × %(blocks)s block averages: the prompt is long; press \"Full matrix\" for every weight")
      : gettext("%(blocks)s × %(blocks)s block averages: all the prefill sent for this head; press \"Full matrix\" for every weight"), { blocks: B }),
    source: "blocks" };
}
