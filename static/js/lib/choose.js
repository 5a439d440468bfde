// What an embedded diagram shows (docs/embedding.md, "Choosing what to show"): the `step`, `layer`, `head`,
// `controls` and `caption` attributes (the same names as the iframe pages' query parameters), resolved
// against the run. Pure functions of the attribute text and the run's step payloads, apart from applyControls.

/** Sections whose diagram shows one step (they get a step scrubber in an embed). */
export const STEPPED = ["attention", "layers", "logits", "stages", "filter", "dice", "sequence", "kv"];
export const CONTROLS = ["none", "scrubber", "full"];

/**
 * Entropy in nats of a step's final sampling distribution, from what the step payload carries: `probs`,
 * its most likely tokens. The rest of the mass (1 − their sum) is spread over tokens each at most as likely
 * as the least likely listed one, so it adds at least rest · ln(1 / p_min): the least entropy consistent
 * with the payload. NaN for a step without probabilities.
 */
export function stepEntropy(step) {
  const probs = (step?.probs || []).map((p) => Number(p.prob)).filter((p) => p > 0);
  if (!probs.length) return NaN;
  const listed = probs.reduce((h, p) => h - p * Math.log(p), 0);
  const rest = Math.max(0, 1 - probs.reduce((a, b) => a + b, 0));
  return listed + (rest > 1e-9 ? rest * Math.log(1 / Math.min(...probs)) : 0);
}

/** The 1-based step with the most uncertain distribution (the first of equals); 0 without steps. */
export function maxEntropyStep(steps) {
  let best = 0, most = -Infinity;
  steps.forEach((step, i) => {
    const h = stepEntropy(step);
    if (h > most) { most = h; best = i + 1; }
  });
  return best;
}

/**
 * The step a `step` attribute names out of `steps` (payloads, index = step − 1): 0 is the prefill, 1 … n the
 * generated tokens; `first` is step 1, `last` the newest, `max-entropy` the most uncertain. A number past the
 * run is its newest step. null when the attribute is absent or not understood (follow the page).
 */
export function resolveStep(attr, steps) {
  const n = steps.length;
  const text = (attr ?? "").trim().toLowerCase();
  if (text === "") return null;
  if (text === "first") return Math.min(1, n);
  if (text === "last") return n;
  if (text === "max-entropy") return maxEntropyStep(steps);
  const value = Number(text);
  return Number.isFinite(value) ? Math.max(0, Math.min(Math.trunc(value), n)) : null;
}

/**
 * A 0-based index out of `count` from an attribute written as the page labels it: layers from 1 (`layer="1"`
 * is the first block, as "layer 1" in the diagrams), heads from 0. null when absent or not a number.
 */
export function resolveIndex(attr, count, first = 0) {
  const text = (attr ?? "").trim();
  const value = Number(text);
  if (text === "" || !Number.isFinite(value) || count < 1) return null;
  return Math.max(0, Math.min(Math.trunc(value) - first, count - 1));
}

/** The `controls` attribute: none | scrubber | full (the default, and for anything else). */
export function controlsOf(attr) {
  const text = (attr ?? "").trim().toLowerCase();
  return CONTROLS.includes(text) ? text : "full";
}

/** The `caption` attribute: only "off" turns the caption line off. */
export const captionOn = (attr) => (attr ?? "").trim().toLowerCase() !== "off";
const CAPTION_WORDS = ["", "on", "off"]; // the attribute's own values; any other text is the author's caption
export const CAPTION_CHARS = 300;

/** The author's own caption text (`caption="…"`, shown as text, never HTML), or null for the script's own. */
export function authorCaption(attr) {
  const text = (attr ?? "").trim();
  return CAPTION_WORDS.includes(text.toLowerCase()) ? null : text.slice(0, CAPTION_CHARS);
}

/** With controls other than "full" a diagram is a picture: its own buttons, sliders and menus are hidden. */
export function applyControls(root, mode) {
  for (const control of root.querySelectorAll("button, select, input, textarea")) {
    const target = control.closest("label") ?? control;
    // Inline and important: a stylesheet's `display` on labels or buttons would beat the hidden attribute.
    if (mode !== "full") { target.style.setProperty("display", "none", "important"); target.dataset.heHidden = ""; }
    else if (target.dataset.heHidden != null) { target.style.removeProperty("display"); delete target.dataset.heHidden; }
  }
}
