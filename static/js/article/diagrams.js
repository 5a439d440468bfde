// The article's diagrams: loads each element's module and hands every defined one the page's RunState;
// the hover readout for diagrams that have none of their own.
import { el } from "../lib/base-element.js";
import { fillRunWords } from "../run-words.js";
import { SECTIONS } from "../embed-driver.js";
import { addTableAlternative } from "../lib/table-alt.js";
import { state } from "./page.js";

const ELEMENTS = [...SECTIONS.map((section) => `he-${section}`), "he-pipeline"];
// Heatmap diagrams carry a table per heatmap (lib/grid.js); the map of the pipeline is the contents, not a diagram.
const OWN_TABLES = new Set(["he-attention", "he-layers", "he-mask", "he-pipeline"]);
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
}

export function loadElements() {
  for (const name of ELEMENTS) {
    import(`../elements/${name}.js`)
      .then(() => customElements.whenDefined(name))
      .then(() => feedDiagrams(name))
      .catch((err) => console.warn(`diagram ${name} did not load`, err));
  }
}

/** The hover readout: the title of whatever is hovered or tapped inside a diagram. */
export function bindReadout() {
  const show = (event) => {
    const target = event.target instanceof Element ? event.target.closest("[title]") : null;
    const diagram = target?.closest("[data-rendered]");
    if (!target || !diagram || !diagram.localName.startsWith("he-")) return;
    if (diagram.querySelector("[class*=readout]")) return; // the diagram has its own readout
    // The readout sits right after the diagram, so it survives the diagram's redraws.
    let out = diagram.nextElementSibling;
    if (!out?.classList.contains("he-readout")) {
      out = el("p", { class: "he-readout" });
      diagram.after(out);
    }
    out.textContent = target.getAttribute("title");
  };
  document.addEventListener("pointerover", show);
  document.addEventListener("click", show);
}
