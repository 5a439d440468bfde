// The article's diagrams: loads each element's module and hands every defined one the page's RunView;
// "Show as table" and the export buttons beside each one.
import { fillRunWords } from "../run-words.js";
import { SECTIONS } from "../embed-driver.js";
import { addTableAlternative } from "../lib/table-alt.js";
import { addExportBar } from "../export-bar.js";
import { $, page, state } from "./page.js";
import { gettext } from "../lib/i18n.js";
import { feedCompare } from "./compare.js";

// he-languages: the article's own (a table of the served tokenizer's counts, not a step of the run: no embed).
const ELEMENTS = [...SECTIONS.map((section) => `he-${section}`), "he-pipeline", "he-languages"];
// Heatmap diagrams carry a table per heatmap (lib/grid.js); the map of the pipeline is the contents, not a diagram.
const OWN_TABLES = new Set(["he-attention", "he-layers", "he-mask", "he-pipeline", "he-languages"]);
let diagrams = [];

/** Every diagram on the page; each one without its own gets a "Show as table" after it. */
export function findDiagrams() {
  diagrams = [...document.querySelectorAll(ELEMENTS.join(","))];
  for (const node of diagrams) if (!OWN_TABLES.has(node.localName)) addTableAlternative(node);
}

/** Give the state to every defined diagram (setting a property before the upgrade would shadow it). */
export function feedDiagrams(only) {
  if (!only) fillRunWords(state.prefill);
  for (const node of diagrams) {
    if (only && node.localName !== only) continue;
    if (customElements.get(node.localName)) node.data = state;
  }
  if (!only) feedCompare(); // run B's twins and <he-compare> (issue 29)
}

export function loadElements() {
  for (const name of ELEMENTS) {
    import(`../elements/${name}.js`)
      .then(() => customElements.whenDefined(name))
      .then(() => feedDiagrams(name))
      .catch((err) => console.warn(`diagram ${name} did not load`, err));
  }
}

/** What a copied embed code shows: the recording or example on show, or this page's finished run, saved first. */
async function embedSource() {
  if (page.mode === "recording") return { run: document.querySelector("[data-run-id]").dataset.runId };
  if (page.mode === "example" && $("#example-bar")?.dataset.example) return { example: $("#example-bar").dataset.example };
  if (page.mode !== "live" || !page.recorder) throw new Error(gettext("nothing has run yet"));
  if (!state.done) throw new Error(gettext("the run is still going: copy the embed code once it has finished"));
  return { run: (await page.recorder.savedRun()).id };
}

/** "Download SVG", "Download PNG" and "Copy embed code" under every section's diagram (the sticky pipeline strip is navigation). */
export function addExportBars() {
  for (const node of diagrams) if (SECTIONS.includes(node.localName.slice(3))) addExportBar(node, { source: embedSource });
}
