// Small helpers the step diagrams share: hover readout, token chips, number formats.
import { el, showPiece } from "./base-element.js";
import { showTip, hideTip } from "./pointer.js";
import { decimal, fill, gettext, grouped } from "./i18n.js";

/** A probability as a percentage, with more digits for small ones. */
export function pct(p) {
  if (p == null || !Number.isFinite(p)) return "–";
  const v = p * 100;
  return `${decimal(v, v >= 10 ? 1 : v >= 0.1 ? 2 : 3)}%`;
}

/** An integer with thousands separators. */
export function int(n) { return n == null ? "–" : grouped(n); }

/** The line that shows the value under the pointer (tap works too, where there is no hover). */
export function readout(hint = gettext("Hover or tap a bar to read its exact values.")) {
  const node = el("p", { class: "he-readout", part: "readout", "aria-live": "polite" }, hint);
  node.dataset.hint = hint;
  return node;
}

/** Give `node` a hover value: a native tooltip, the (aria-live) readout line and the tip beside the node. */
export function hover(node, text, line, focusable = true) {
  node.title = text;
  if (focusable && node.tabIndex < 0) node.tabIndex = 0;
  const show = () => { if (line) line.textContent = text; showTip(node, text); };
  node.addEventListener("pointerenter", show);
  node.addEventListener("focus", show);
  node.addEventListener("click", show);
  // A finger lifted leaves too: a tapped value stays until the next tap or the focus moves on.
  node.addEventListener("pointerleave", (e) => { if (e.pointerType === "mouse") hideTip(node); });
  node.addEventListener("blur", () => hideTip(node, { force: true }));
  return node;
}

/** A token piece as visible text (never markup), with its id. */
export function chip(text, id, cls = "") {
  const node = el("span", { class: `he-chip ${cls}`.trim(), "data-id": id });
  node.append(el("span", { class: "he-piece" }, showPiece(text ?? "")));
  if (id != null) node.append(el("span", { class: "he-id" }, id));
  return node;
}

/** id → piece text from whatever lists of the step carry text. */
export function textsOf(...lists) {
  const map = new Map();
  for (const list of lists) for (const t of list || []) if (t && t.text != null) map.set(t.id, t.text);
  return map;
}

/** Highlight every node with the same data-id inside `root` while one of them is hovered. */
export function linkIds(root) {
  root.addEventListener("pointerover", (e) => {
    const id = e.target.closest?.("[data-id]")?.dataset.id;
    for (const n of root.querySelectorAll(".he-linked")) n.classList.remove("he-linked");
    if (id != null) for (const n of root.querySelectorAll(`[data-id="${CSS.escape(id)}"]`)) n.classList.add("he-linked");
  });
}

/** Mount persistent controls above a body that each render replaces (in the element's shadow root); returns the body. */
export function mount(host, ...controls) {
  if (!host.hebBody) {
    host.hebBody = el("div", { class: "he-body" });
    host.root.replaceChildren(...controls, host.hebBody);
  }
  return host.hebBody;
}

/**
 * Marks `node.heHovered` while the pointer rests on it; calls `released` once the pointer itself moves off.
 * A leave at the pointer's last coordinates is the page moving under a resting pointer (a section above
 * redrawn for the next step), not the visitor leaving: the hold then lasts until the pointer really moves.
 */
function holdUnderPointer(node, released) {
  let at = null;
  const release = () => { node.heHovered = false; document.removeEventListener("pointermove", moved); released(); };
  const moved = (e) => {
    if (e.clientX === at?.x && e.clientY === at?.y) return;
    if (!e.composedPath().includes(node)) release();
  };
  const track = (e) => { at = { x: e.clientX, y: e.clientY }; };
  node.addEventListener("pointerenter", (e) => { node.heHovered = true; track(e); document.removeEventListener("pointermove", moved); });
  node.addEventListener("pointermove", track);
  node.addEventListener("pointerleave", (e) => {
    if (at && e.clientX === at.x && e.clientY === at.y && e.pointerType === "mouse") {
      document.addEventListener("pointermove", moved);
      return;
    }
    release();
  });
}

/**
 * "Continue from here with this token": one button per candidate (not the one the step chose). A click asks
 * the page to `fork` the run at `step` with that token (docs/protocol.md); a recording answers with a note.
 * Nothing (an empty fragment) where no live run could fork: a recording an embed replays (RunView.forkable).
 */
export function forkRow(host, step, candidates) {
  if (host.data?.forkable === false) return new DocumentFragment();
  // Under the pointer the chips stay as drawn (issue 23: a click aimed at step 13 must not fork step 14):
  // the held row names its own step, and the diagram redraws it once the pointer leaves.
  const held = host.heForkRow;
  // Tracked by its pointer events (holdUnderPointer), not `:hover` at drawing time.
  if (held?.isConnected && held.heHovered && held.dataset.step !== String(step.step)) {
    held.dataset.stale = "true";
    return held;
  }
  const row = el("div", { class: "he-forks", role: "group", "data-step": step.step, "aria-label": fill(gettext("Fork step %(step)s: continue with another token"), step) });
  host.heForkRow = row;
  holdUnderPointer(row, () => { if (row.dataset.stale) host.data = host.data; });
  row.append(el("span", { class: "he-forks-label" }, fill(gettext("Continue from step %(step)s with:"), step)));
  const seen = new Set([step.token.id]);
  for (const c of candidates) {
    if (seen.has(c.id) || c.text == null) continue;
    seen.add(c.id);
    const button = el("button", { type: "button", class: "he-fork", "data-token-id": c.id,
      title: fill(gettext("continue from step %(step)s with %(token)s (id %(id)s) instead of %(chosen)s"),
        { step: step.step, token: showPiece(c.text), id: c.id, chosen: showPiece(step.token.text) }) });
    button.append(chip(c.text, c.id));
    button.addEventListener("click", () => host.dispatchEvent(new CustomEvent("he-request", {
      bubbles: true, composed: true, detail: { type: "fork", step: step.step, token_id: c.id, continue: true } })));
    row.append(button);
    if (seen.size > 6) break;
  }
  return row;
}
