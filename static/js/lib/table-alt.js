// "Show as table": the text alternative of a diagram that is not a heatmap (heatmaps build their own, grid.js).
// Every value a diagram shows is also its parts' hover text (widgets.js `hover`, SVG <title>), so the table
// lists each part's visible label beside that text, rebuilt from the diagram each time it redraws.
import { el } from "./base-element.js";
import { gettext, fill } from "./i18n.js";

/** [part, value] for every titled part of `diagram` outside its heatmaps, in document order, without repeats. */
export function titledParts(diagram) {
  const roots = [diagram, ...(diagram.shadowRoot ? [diagram.shadowRoot] : [])];
  const rows = [], seen = new Set();
  for (const root of roots) {
    for (const node of root.querySelectorAll("[title], svg title")) {
      if (node.closest(".he-matrix, .he-table-alt")) continue;
      const isSvgTitle = node.localName === "title";
      const value = (isSvgTitle ? node.textContent : node.getAttribute("title") || "").trim();
      // innerText keeps the layout's breaks between a part's pieces (label, bar, number): shown as " · "
      const text = node.getAttribute("aria-label") || node.innerText || node.textContent || "";
      const part = isSvgTitle ? "" : text.split(/\s*[\t\n]+\s*/).map((t) => t.replace(/\s+/g, " ").trim()).filter(Boolean).join(" · ");
      const key = `${part}\u0000${value}`;
      if (!value || seen.has(key)) continue;
      seen.add(key);
      rows.push([part, value]);
    }
  }
  return rows;
}

function fillTable(box, diagram, label) {
  box.querySelector(".he-scroll")?.remove();
  const rows = titledParts(diagram);
  const table = el("table", {});
  table.append(el("caption", {}, label));
  const head = el("tr", {});
  head.append(el("th", { scope: "col" }, gettext("part")), el("th", { scope: "col" }, gettext("value")));
  table.append(head);
  for (const [part, value] of rows) {
    const tr = el("tr", {});
    tr.append(el("th", { scope: "row" }, part || "–"), el("td", {}, value));
    table.append(tr);
  }
  if (!rows.length) {
    const empty = el("tr", {});
    empty.append(el("td", { colspan: "2" }, gettext("Nothing drawn yet.")));
    table.append(empty);
  }
  const scroll = el("div", { class: "he-scroll tall", tabindex: "0", role: "region", "aria-label": fill(gettext("%(label)s (scrollable)"), { label }) });
  scroll.append(table);
  box.append(scroll);
}

/** Put a "Show as table" after `diagram` (once); its table is built on opening and follows every redraw. */
export function addTableAlternative(diagram) {
  if (diagram.nextElementSibling?.classList.contains("he-table-alt")) return;
  const heading = diagram.closest("section")?.querySelector("h2")?.textContent?.trim();
  const label = fill(gettext("%(diagram)s: every value of the diagram, as text"), { diagram: heading || diagram.localName });
  const box = el("details", { class: "he-table-alt he-table-alt-diagram" });
  box.append(el("summary", {}, gettext("Show as table")));
  box.addEventListener("toggle", () => { if (box.open) fillTable(box, diagram, label); });
  new MutationObserver(() => { if (box.open) fillTable(box, diagram, label); })
    .observe(diagram, { attributes: true, attributeFilter: ["data-rendered"] });
  diagram.after(box);
}
