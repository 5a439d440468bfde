"""axe-core (WCAG 2.2 AA) finds nothing on the article after a run, on a saved run and on the embeds page;
heatmaps answer the keyboard; focus stays visible and clear of the sticky bar."""
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_replay import record
from tests.conftest import full_range, require

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
# axe's violations, nothing else: its whole result lists every node that passed each rule, with its HTML (tens of
# megabytes on the article), and carrying that to Python took 40 of the 57 s of one pass. resultTypes keeps axe
# from collecting the other kinds' nodes in the first place.
AXE_RUN = ("tags => axe.run(document, {iframes: false, resultTypes: ['violations'], runOnly: {type: 'tag', values: tags}})"
           ".then((result) => result.violations)")


@pytest.fixture
def axe_page(browser, request):
    """A page whose context may add axe's script tag despite the site's CSP (the site itself never relaxes it)."""
    require(AXE.is_file(), "axe-core from npm (package.json)", "make npm")
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and page.errors.append(msg.text))
    yield page
    context.close()


def scroll_through(page) -> None:
    """Scroll to the bottom a screen at a time, so every diagram (they render when seen) and lazy iframe draws,
    then back to the top: axe counts whatever lies under the sticky run bar at that moment as obscured (a fork
    button under "Save run" failed target-size whenever the run's length put one there), and a reader scrolls
    on. Focus kept clear of that bar is its own test below."""
    height = page.evaluate("document.documentElement.scrollHeight")
    for y in range(0, height + 900, 700):
        page.mouse.wheel(0, 700)
        page.wait_for_timeout(60)
    page.wait_for_timeout(500)
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_function("() => window.scrollY === 0")


def violations(page, frames: bool = True) -> list[dict]:
    """axe-core's violations for the page and (with `frames`) each frame it embeds, tagged WCAG 2.0–2.2 A/AA."""
    source = AXE.read_text()
    found = []
    for frame in page.frames if frames else [page.main_frame]:  # each document on its own (axe's frame messaging stalls)
        if frame.url.startswith("about:"):
            continue
        frame.add_script_tag(content=source)
        found += [{**v, "frame": frame.url} for v in frame.evaluate(AXE_RUN, TAGS)]
    return [{"id": v["id"], "frame": v["frame"], "impact": v["impact"], "count": len(v["nodes"]),
             "where": [n["target"] for n in v["nodes"][:5]],
             "why": sorted({n["failureSummary"].splitlines()[1].strip()[:200] for n in v["nodes"]})[:12]}
            for v in found]


def assert_clean(page) -> None:
    found = violations(page)
    assert not found, "axe-core found:\n" + json.dumps(found, indent=1)


def test_article_after_a_finished_run_has_no_axe_violations(axe_page, site_url):
    frames = collect_frames(axe_page)
    run_prompt(axe_page, site_url, frames)
    scroll_through(axe_page)
    assert_clean(axe_page)
    assert not axe_page.errors, axe_page.errors


def test_saved_run_has_no_axe_violations(axe_page, site_url):
    url, _ = record(site_url)
    axe_page.goto(site_url + url)
    expect(axe_page.locator("he-stop")).to_be_attached()
    scroll_through(axe_page)
    assert_clean(axe_page)
    assert not axe_page.errors, axe_page.errors


# Outside CI, one embed of each kind of drawing (SAMPLED_EMBEDS): a heatmap with its roving grid and table
# alternative, a form that runs the model, a table, a measure bar, token chips and a chart.
SAMPLED_EMBEDS = {"attention", "dice", "kvcalc", "quant", "tokens", "timeline"}
# An embed page has drawn once its diagram element has rendered (base-element.js sets data-rendered).
EMBED_DRAWN = """() => [...document.querySelectorAll('body *')].some((e) => e.localName.startsWith('he-') && e.hasAttribute('data-rendered'))"""


@pytest.mark.slow
def test_embeds_page_has_no_axe_violations(axe_page, site_url):
    """The demo page's own document, then every embed it frames, each opened as the page it is (22 live
    frames checked in place left axe waiting on frames that had not drawn; the documents are the same).
    An endurance test: all 22 sections under CI=true (full_range()), one of each kind of drawing otherwise (axe on
    the demo document alone took 84 s of its 135 s, most of it in the layers, attention and mask sections)."""
    # The demo document is checked with its frames left empty: 22 live same-origin embeds share its renderer's
    # main thread and made axe's pass over the document alone take minutes; each embed is checked below.
    axe_page.route(re.compile(r"/embed/[a-z-]+/"), lambda route: route.abort())
    axe_page.goto(site_url + "/embed/")
    embeds = sorted(set(axe_page.eval_on_selector_all(
        "iframe[data-he-embed]", "els => els.map(e => { const u = new URL(e.src); return u.pathname + u.search; })")))
    assert len(embeds) >= 20, embeds
    checked = embeds if full_range() else [p for p in embeds if p.split("/")[2] in SAMPLED_EMBEDS]
    assert len(checked) >= len(SAMPLED_EMBEDS), (checked, embeds)  # a renamed section cannot drop out of the sample
    if not full_range():  # every section is the same markup around its diagram: the sample's sections stand for it
        left = axe_page.evaluate("""keep => { for (const s of document.querySelectorAll('section[data-section]'))
            if (!keep.includes(s.dataset.section)) s.remove();
            return document.querySelectorAll('section[data-section]').length; }""", sorted(SAMPLED_EMBEDS))
        assert left == len(SAMPLED_EMBEDS), left
    scroll_through(axe_page)
    found = violations(axe_page, frames=False)
    axe_page.unroute_all()
    for path in checked:
        axe_page.goto(site_url + path)
        axe_page.wait_for_function(EMBED_DRAWN, timeout=30_000)  # checked as drawn, not after a guessed wait
        found += violations(axe_page, frames=False)
    assert not found, "axe-core found:\n" + json.dumps(found, indent=1)
    assert not axe_page.errors, axe_page.errors


def test_heatmap_is_one_tab_stop_with_a_cursor_value_beside_it_and_a_table(page, site_url):
    page.goto(site_url + "/")
    mask = page.locator("he-attention")  # the attention heatmaps (the mask draws bars past 32 tokens)
    mask.scroll_into_view_if_needed()
    # the example's whole file replaces its first paint at the first scroll, redrawing the heatmap: click after it
    expect(page.locator("#example-bar")).to_have_attribute("data-whole", re.compile(r".+"), timeout=30_000)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")  # its redraw
    expect(mask).to_have_attribute("data-rendered", re.compile(r"\d+"), timeout=15_000)
    grid = mask.locator(".he-matrix").first
    expect(grid).to_be_visible()
    assert grid.locator('[tabindex="0"]').count() == 1  # one tab stop per heatmap
    first = grid.locator(".he-cell").first
    first.click()
    expect(first).to_be_focused()
    page.keyboard.press("ArrowRight")
    second = grid.locator('.he-cell[data-r="0"][data-c="1"]')
    expect(second).to_be_focused()
    assert grid.locator('[tabindex="0"]').count() == 1  # the stop moved with the cursor (roving tabindex)
    title = second.get_attribute("title")
    tip = mask.locator(".he-tip").first
    expect(tip).to_be_visible()
    expect(tip).to_have_text(title)
    expect(mask.locator(".he-grid-readout[aria-live]").first).to_have_text(title)  # announced
    cell, box = second.bounding_box(), tip.bounding_box()
    assert abs(box["y"] - cell["y"]) < 4 and abs(box["x"] - (cell["x"] + cell["width"])) < 12  # next to the cell
    page.keyboard.press("End")
    last_col = grid.locator('.he-cell[data-r="0"]').count() - 1
    expect(grid.locator(f'.he-cell[data-r="0"][data-c="{last_col}"]')).to_be_focused()
    mask.locator(".he-table-alt summary").first.click()
    table = mask.locator(".he-table-alt table").first
    expect(table).to_be_visible()
    assert table.locator("tr").count() == grid.locator(".he-matrix-row").count()
    assert title in table.inner_text()
    assert not page.errors, page.errors


def test_attention_has_a_colour_legend(page, site_url):
    page.goto(site_url + "/")
    attention = page.locator("he-attention")
    attention.scroll_into_view_if_needed()
    legend = attention.locator(".he-heat-legend").first
    expect(legend).to_be_visible(timeout=15_000)
    expect(legend).to_contain_text("attention weight")
    assert legend.locator(".he-heat-swatch").count() == 5
