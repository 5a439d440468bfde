"""Focus is never hidden under the sticky bar (issue 13, item 9): Tab and Shift+Tab through the whole article
after a finished run, and every focused element outside the bar sits below the bar's bottom edge."""
import pytest
from playwright.sync_api import expect
from test_article import collect_frames, run_prompt

MAX_STOPS = 600  # far more than the article has: a walk that does not come round fails instead of looping

# Where focus is now (inside shadow roots too): its box, the sticky bar's bottom, whether it is in the bar, and
# whether the walk has been here before (each stop is marked, so coming round ends the walk).
WHERE = """() => {
  let node = document.activeElement;
  while (node?.shadowRoot?.activeElement) node = node.shadowRoot.activeElement;
  const bar = document.querySelector(".run-bar");
  const { top: barTop, bottom: barBottom } = bar.getBoundingClientRect();
  if (!node || node === document.body || node === document.documentElement) return { none: true };
  // In the bar, across shadow roots (the map of the pipeline draws its stages in one).
  const within = (n, outer) => { for (; n; n = n.parentNode || n.host) if (n === outer) return true; return false; };
  const seen = node.hasAttribute("data-focus-walk");
  node.setAttribute("data-focus-walk", "");
  const box = node.getBoundingClientRect();
  const cls = typeof node.className === "string" && node.className.trim() ? "." + node.className.trim().split(/\\s+/).join(".") : "";
  const label = `${node.localName}${node.id ? "#" + node.id : ""}${cls} in #${node.closest("section[id]")?.id ?? "page"}`
    + ` "${(node.getAttribute("aria-label") || node.textContent || "").trim().slice(0, 40)}"`;
  return { seen, label, top: box.top, bottom: box.bottom, height: box.height, barTop, barBottom, inBar: within(node, bar), viewport: innerHeight };
}"""
WHERE_WHEN_LAID_OUT = f"""async () => {{
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return ({WHERE})();
}}"""
START = """(fromTop) => {
  // The marks of an earlier walk, in the diagrams' shadow roots too (document.querySelectorAll stops at them).
  const clear = (root) => {
    for (const n of root.querySelectorAll("*")) {
      n.removeAttribute("data-focus-walk");
      if (n.shadowRoot) clear(n.shadowRoot);
    }
  };
  clear(document);
  // Sequential navigation starts from a focused point: a bare mark at the top (or the bottom) of the body.
  const mark = Object.assign(document.createElement("span"), { tabIndex: -1, id: "focus-walk-start" });
  if (fromTop) document.body.prepend(mark); else document.body.append(mark);
  scrollTo(0, fromTop ? 0 : document.documentElement.scrollHeight);
  mark.focus({ preventScroll: true });
}"""


def walk(page, key: str) -> list[dict]:
    """Press `key` until focus comes back round to the start (or leaves the page for the browser's own
    controls); every stop. A stop whose diagram redrew under it (focus falls to the body) is walked on from."""
    page.evaluate(START, key == "Tab")
    stops, outside = [], 0
    for _ in range(MAX_STOPS):
        page.keyboard.press(key)
        where = page.evaluate(WHERE_WHEN_LAID_OUT)  # one round trip a stop: two frames (scrolled, laid out), then WHERE
        if where.get("label", "").startswith("span#focus-walk-start") or where.get("seen"):
            return stops  # round to the start
        if where.get("none"):
            outside += 1
            if outside >= 3:
                return stops  # focus stays out of the document: past its last stop
            continue
        outside = 0
        stops.append(where)
    pytest.fail(f"{key} did not come round in {MAX_STOPS} stops")


def hidden(stops: list[dict]) -> list[str]:
    """Stops outside the bar that it covers (the box starts above the bar's bottom edge while the bar is over
    it), or that are below the screen."""
    return [f"{s['label']} (top {s['top']:.0f}, bar {s['barTop']:.0f}–{s['barBottom']:.0f})" for s in stops
            if not s["inBar"] and s["height"] > 0
            and ((s["top"] < s["barBottom"] - 1 and s["bottom"] > s["barTop"] + 1) or s["top"] >= s["viewport"])]


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"])
def test_tab_and_shift_tab_never_hide_focus_under_the_sticky_bar(browser, site_url, viewport):
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=6)
    assert not run["error"], run["error"]
    # Scrolled through once, so every diagram is drawn and each serving section has its measurement (they
    # measure on sight): the walk then meets the page as a reader who scrolled down would.
    page.evaluate("async () => { for (let y = 0; y < document.body.scrollHeight; y += 400) { scrollTo(0, y); await new Promise((r) => setTimeout(r, 100)); } }")
    for diagram in ("he-languages", "he-timeline", "he-kvcalc", "he-batch", "he-speculative", "he-quant"):
        page.locator(diagram).scroll_into_view_if_needed()  # a diagram draws (its status too) only on screen
        expect(page.locator(f"{diagram} .he-status[data-state=pending]")).to_have_count(0, timeout=240_000)
    # A keyboard walk: the pointer rests on the sticky bar, not where Play was clicked. Left over the article, the
    # content scrolling under it shows hover readouts (each a line more in its diagram) between two stops.
    page.mouse.move(1, 1)
    forward = walk(page, "Tab")
    backward = walk(page, "Shift+Tab")
    context.close()


    assert len(forward) > 40 and len(backward) > 40, (len(forward), len(backward))  # the whole article, not a corner of it
    assert sum(not s["inBar"] for s in forward) > 30  # most stops are in the article below the bar
    assert hidden(forward) == [], f"Tab: {len(hidden(forward))} of {len(forward)} stops hidden"
    assert hidden(backward) == [], f"Shift+Tab: {len(hidden(backward))} of {len(backward)} stops hidden"
