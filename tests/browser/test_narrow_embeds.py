"""Every section usable in a 320 px column (issue 27, point 7): as element and as iframe, nothing is cut off by its
box or the viewport (tests/browser/clipped.js says what counts; a diagram too wide scrolls inside itself), and the
author's page itself never scrolls sideways."""
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_embed import author_page, console_errors, html  # noqa: F401 (fixtures)
from tests.browser.test_embed_choose import SECTIONS
from tests.browser.test_no_clipped_text import CLIPPED

NARROW = {"width": 320, "height": 900}
# What sticks out past the column without a scroller (or clip) above it: what makes the author's page scroll sideways.
OUTSIDE = """() => {
  const up = (node) => node.parentElement ?? node.getRootNode().host ?? null;
  const held = (node) => { for (let n = up(node); n; n = up(n)) if (/auto|scroll|hidden|clip/.test(getComputedStyle(n).overflowX)) return true; return false; };
  const out = [];
  const walk = (root, host) => {
    for (const n of root.querySelectorAll("*")) {
      if (n.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && !held(n)) out.push(`${host} ${n.localName}.${n.className}`);
      if (n.shadowRoot) walk(n.shadowRoot, n.localName);
    }
  };
  walk(document, "page");
  return out.slice(0, 20);
}"""


def test_every_section_fits_a_320_px_column(browser, site_url, author_page):
    context = browser.new_context(viewport=NARROW)
    page = context.new_page()
    try:
        items = "".join(f'<he-{s} example="biopsy" step="2"></he-{s}>' for s in SECTIONS)
        frames = "".join(f'<iframe data-he-embed src="{site_url}/embed/{s}/?example=biopsy&step=2" title="{s}" '
                         'style="width: 100%; border: 0"></iframe>' for s in SECTIONS)
        page.goto(author_page("narrow.html", html(site_url, items + frames, head="<style>body { margin: 8px }</style>")))
        page.wait_for_function(f"document.querySelectorAll('[data-he-eager][data-rendered]').length === {len(SECTIONS)}",
                               timeout=120_000)
        page.wait_for_function("[...document.querySelectorAll('iframe')].every((f) => f.style.height)", timeout=120_000)
        page.wait_for_timeout(500)
        found = [f"{c['where']}: {c['text']!r}: {c['why']}" for c in page.evaluate(CLIPPED)]
        for frame in page.frames[1:]:
            found += [f"iframe {frame.url}: {c['where']}: {c['text']!r}: {c['why']}" for c in frame.evaluate(CLIPPED)]
        assert not found, "\n".join(found[:40])
        assert page.evaluate("document.scrollingElement.scrollWidth") <= NARROW["width"], page.evaluate(OUTSIDE)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "narrow-embeds.png"), full_page=True)
    finally:
        context.close()
