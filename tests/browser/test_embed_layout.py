"""Embeds without layout jumps (issue 17, item 5): every section both ways keeps its place, and live embeds far
down a page run, draw and size themselves before anyone scrolls to them."""
import pytest

from tests.browser.test_accessibility import SAMPLED_EMBEDS
from tests.browser.test_embed import console_errors  # noqa: F401 (a fixture)
from tests.browser.test_embed_choose import SECTIONS, blog, page_html  # noqa: F401 (a fixture)
from tests.conftest import full_range

CLS_OBSERVER = """window.heShifts = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) if (!e.hadRecentInput) heShifts.push(e.value); })
  .observe({ type: "layout-shift", buffered: true });"""


def test_every_section_both_ways_without_layout_shift(page, site_url, blog):
    """CLS (layout-shift entries, summed) stays ≤ 0.05 from the first paint to every embed drawn and sized."""
    items = "".join(f'<h2>{s}</h2><he-{s} example="biopsy"></he-{s}>'
                    f'<iframe data-he-embed src="{site_url}/embed/{s}/?example=biopsy" title="{s}"></iframe><p>After {s}.</p>'
                    for s in SECTIONS)
    head = (f'<link rel="stylesheet" href="{site_url}/static/css/embed.css">'
            '<style>body { max-width: 720px; margin: 0 auto; } iframe { width: 100%; border: 0; display: block; }</style>')
    page.add_init_script(CLS_OBSERVER)
    page.goto(blog("all.html", page_html(items, head=head, script=f"{site_url}/static/js/embed.js")))
    page.wait_for_function(f"""() => document.querySelectorAll('[data-he-eager][data-rendered]').length === {len(SECTIONS)}
        && [...document.querySelectorAll('iframe')].every((f) => f.style.height)""", timeout=120_000)
    page.wait_for_timeout(1500)
    for y in range(0, page.evaluate("document.body.scrollHeight"), 700):  # a reader scrolling down (not an input)
        page.evaluate(f"window.scrollTo(0, {y})")
        page.wait_for_timeout(60)
    page.wait_for_timeout(1000)
    shifts = page.evaluate("heShifts")
    assert sum(shifts) <= 0.05, shifts


def settled_shifts(page) -> list:
    """Once every element drew and the iframe is sized (and a moment after): the page's layout shifts so far."""
    page.wait_for_function("""() => { const drawn = [...document.querySelectorAll('[data-he-eager]')];
        return drawn.length && drawn.every((e) => e.hasAttribute('data-rendered'))
          && [...document.querySelectorAll('iframe')].every((f) => f.style.height); }""", timeout=60_000)
    page.wait_for_timeout(800)
    return page.evaluate("heShifts")


@pytest.mark.slow
def test_fallback_content_keeps_its_place_on_fresh_and_cached_loads(browser, site_url, blog):
    """With the author's fallback inside the element (as docs/embedding.md suggests), without it, and as an iframe,
    the data slow to come: the caption and export buttons stay put when the diagram replaces the fallback, and the
    iframe keeps its box. CLS ≤ 0.05 for every section on a fresh load (a new browser context: nothing cached) and
    on a reload from the cache. An endurance test (a slow network, two loads a section: ~5 s each): every section
    under CI=true (full_range()), else one of each kind of drawing (tests/browser/test_accessibility.py's sample)."""
    head = (f'<link rel="stylesheet" href="{site_url}/static/css/embed.css">'
            '<style>body { max-width: 720px; margin: 0 auto; } iframe { width: 100%; border: 0; display: block; }</style>')
    assert SAMPLED_EMBEDS <= set(SECTIONS), SAMPLED_EMBEDS - set(SECTIONS)  # a renamed section cannot drop out
    scores = {}
    for s in SECTIONS if full_range() else sorted(SAMPLED_EMBEDS):
        body = (f'<he-{s} example="biopsy"><p>A still of this diagram, for readers whose browser runs no scripts.</p></he-{s}>'
                f'<iframe data-he-embed src="{site_url}/embed/{s}/?example=biopsy" title="{s}"></iframe>'
                f'<he-{s} example="biopsy"></he-{s}><p>After {s}.</p>')
        context = browser.new_context(viewport={"width": 760, "height": 3200})  # the elements, the iframe: in view
        try:
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("Network.enable")  # a slow network: the fallback and the controls paint well before the data
            cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 300, "downloadThroughput": 2_000_000,
                                                         "uploadThroughput": 1_000_000})
            page.add_init_script(CLS_OBSERVER)
            page.goto(blog(f"fallback-{s}.html", page_html(body, head=head, script=f"{site_url}/static/js/embed.js")))
            fresh = sum(settled_shifts(page))
            page.reload()
            scores[s] = (round(fresh, 4), round(sum(settled_shifts(page)), 4))
        finally:
            context.close()
    print("CLS (fresh, cached) with and without fallback content, and as an iframe:", scores)
    assert all(max(pair) <= 0.05 for pair in scores.values()), scores


def test_offscreen_live_embeds_run_and_size_themselves(page, site_url, blog):
    prompt = "Why%20is%20the%20sky%20blue%3F"
    body = ('<div style="height: 4000px">Long prose.</div>'
            f'<iframe data-he-embed src="{site_url}/embed/tokens/?prompt={prompt}&autostart=1&max_new_tokens=3"'
            ' style="width: 100%; border: 0"></iframe>'
            '<he-tokens prompt="Why is the sky blue?" max_new_tokens="3" autostart></he-tokens>')
    sizes = []
    page.expose_function("heSized", lambda height: sizes.append(height))
    page.add_init_script("addEventListener('message', (e) => e.data?.type === 'he-embed-size' && heSized(e.data.height))")
    page.goto(blog("live.html", page_html(body, script=f"{site_url}/static/js/embed.js")))
    # Never scrolled: the element draws its run, the iframe's page runs, draws and posts its height.
    page.wait_for_selector("he-tokens[data-token-count]", state="attached", timeout=90_000)
    inner = page.frame_locator("iframe")
    inner.locator(".he-embed-caption[data-state=finished]").wait_for(state="attached", timeout=90_000)
    inner.locator("he-tokens[data-token-count]").wait_for(state="attached", timeout=20_000)
    page.wait_for_function("() => parseFloat(document.querySelector('iframe').style.height) > 200", timeout=90_000)
    assert page.evaluate("window.scrollY") == 0
    assert sizes and max(sizes) > 200


def test_an_iframe_that_drew_before_the_script_ran_is_sized_when_it_does(page, site_url, blog):
    """The embed page posts its height when it changes; one that finished drawing before the host page's
    embed.js listened would keep its default height: the script asks each iframe for its height as it starts."""
    body = f'<iframe data-he-embed src="{site_url}/embed/tokens/?example=biopsy" style="width: 100%; border: 0"></iframe>'
    page.goto(blog("late.html", page_html(body, script="data:text/javascript,")))  # no embed.js yet
    page.frame_locator("iframe").locator("he-tokens[data-rendered]").wait_for(state="attached", timeout=60_000)
    assert not page.evaluate("document.querySelector('iframe').style.height")
    page.add_script_tag(url=f"{site_url}/static/js/embed.js", type="module")
    page.wait_for_function("() => parseFloat(document.querySelector('iframe').style.height) > 200", timeout=30_000)
