// Read by tests/browser/test_no_clipped_text.py (page.evaluate): every visible piece of text in the page and in
// the diagrams' open shadow roots that its box or the viewport cuts off. Returns [{where, text, why}].
() => {
  const found = [];
  const viewport = document.documentElement.clientWidth;
  const SLACK = 1; // sub-pixel rounding: a box 0.5 px short clips nothing a reader sees

  /** The element above `node`, crossing out of a shadow root to its host. */
  const up = (node) => node.parentElement ?? node.getRootNode().host ?? null;

  /** A deliberate horizontal scroller at or above `node` (overflow-x: auto/scroll): its text may run past. */
  const scrolls = (node) => {
    for (let n = node; n; n = up(n)) if (/auto|scroll/.test(getComputedStyle(n).overflowX)) return true;
    return false;
  };

  /** Where a finding is: host element names and the node's tag and classes. */
  const where = (node) => {
    const path = [];
    for (let n = node; n; n = up(n)) if (n === node || n.localName.startsWith("he-")) path.unshift(n.localName + (n.className && typeof n.className === "string" ? "." + n.className.trim().split(/\s+/).join(".") : ""));
    return path.join(" > ");
  };

  /** The node's own text (its direct text children), squeezed. */
  const ownText = (node) => [...node.childNodes].filter((c) => c.nodeType === 3).map((c) => c.data).join("").replace(/\s+/g, " ").trim();

  /** The rectangle its own text children cover. */
  const textRect = (node) => {
    const range = document.createRange();
    const rects = [...node.childNodes].filter((c) => c.nodeType === 3 && c.data.trim())
      .flatMap((c) => { range.selectNodeContents(c); return [...range.getClientRects()]; });
    if (!rects.length) return null;
    return { left: Math.min(...rects.map((r) => r.left)), right: Math.max(...rects.map((r) => r.right)) };
  };

  /** The box that holds an inline node's lines: the nearest ancestor that is not inline. */
  const block = (node) => {
    let n = node;
    while (n && getComputedStyle(n).display.startsWith("inline") && !/inline-(block|flex|grid)/.test(getComputedStyle(n).display)) n = up(n);
    return n ?? node;
  };

  /** Text hidden on purpose: a screen-reader-only node (clip: rect(...)) or one inside it. */
  const offscreenOnPurpose = (node) => {
    for (let n = node; n; n = up(n)) if (getComputedStyle(n).clip !== "auto") return true;
    return false;
  };

  /** The nearest ancestor that cuts off what spills out of it (overflow hidden or clip). */
  const clipper = (node) => {
    for (let n = up(node); n; n = up(n)) if (/hidden|clip/.test(getComputedStyle(n).overflowX)) return n;
    return null;
  };

  const span = (r) => `${Math.round(r.left)}..${Math.round(r.right)} px`;
  const outside = (r, box) => r.right > box.right + SLACK || r.left < box.left - SLACK;

  const check = (node) => {
    if (node.namespaceURI !== "http://www.w3.org/1999/xhtml" || !node.checkVisibility?.()) return;
    const text = ownText(node);
    if (!text || offscreenOnPurpose(node)) return;
    const style = getComputedStyle(node);
    const hides = style.textOverflow === "ellipsis" || /hidden|clip/.test(style.overflowX);
    const flag = (why) => found.push({ where: where(node), text: text.slice(0, 120), why });
    const vertical = style.writingMode.startsWith("vertical"); // a column label reads along its height
    const [need, room] = vertical ? [node.scrollHeight, node.clientHeight] : [node.scrollWidth, node.clientWidth];
    if (hides && need > room + SLACK) {
      flag(`${need} px of text in a ${room} px box that hides the rest`);
      return;
    }
    if (scrolls(node)) return;
    const rect = textRect(node);
    if (!rect) return;
    const cut = clipper(node);
    if (outside(rect, { left: 0, right: viewport })) flag(`its text runs ${span(rect)}, past the ${viewport} px viewport`);
    else if (cut && outside(rect, cut.getBoundingClientRect())) flag(`its text runs ${span(rect)}, out of ${where(cut)} (${span(cut.getBoundingClientRect())}), which hides overflow`);
    else if (/nowrap|pre$/.test(style.whiteSpace) && outside(rect, block(node).getBoundingClientRect())) {
      flag(`unwrapped text runs ${span(rect)}, out of its ${span(block(node).getBoundingClientRect())} box`);
    }
  };

  const walk = (root) => {
    for (const node of root.querySelectorAll("*")) {
      check(node);
      if (node.shadowRoot) walk(node.shadowRoot);
    }
  };
  walk(document);
  return found;
}
