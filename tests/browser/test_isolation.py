"""Isolation both ways and themes (issue 17): an author's page on another origin, with hostile CSS and a dark
background, embeds every section as an element. The page's CSS does not reach the elements' insides, their
stylesheet does not reach the page, and every theme passes axe-core's colour contrast."""
import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ROOT
from tests.browser.test_accessibility import AXE, axe_page, scroll_through  # noqa: F401 (axe_page is a fixture)
from tests.browser.test_embed import author_page, html  # noqa: F401 (author_page is a fixture)
from tests.browser.test_replay import record
from tests.conftest import full_range

EXAMPLE = json.loads((ROOT / "static/examples/index.json").read_text())[0]["id"]  # a shipped run: no model needed
ELEMENTS = ["template", "tokens", "embeddings", "positions", "mask", "attention", "layers", "logits", "stages", "filter",
            "dice", "sequence", "kv", "stream", "stop", "context", "myths", "timeline", "kvcalc", "batch", "speculative", "quant"]
HOSTILE = ("<style>* { font: 30px serif; border: 3px solid red } p, td, th { font-size: 18px }"
           " html, body { background: #111; color: #eee } table { border-collapse: separate }</style>")
AUTHOR_BODY = "<table><tr><th>an author's</th><td>table</td></tr></table><p>More prose.</p>"

# Each element's inner nodes, in order: tag, class, font and border, read inside its (open) shadow root.
INNER_STYLES = """() => [...document.querySelectorAll(%s)].map((host) => {
    const nodes = [...host.shadowRoot.querySelectorAll('*')].filter((n) => n.localName !== 'slot').slice(0, 60);
    return [host.localName, nodes.map((n) => { const s = getComputedStyle(n);
        // A dice segment's piece is sized to its segment's width (a container query): the author's border on the
        // element narrows it, so its size follows the page's layout by design; everything else must not move.
        const size = n.classList.contains('he-seg') ? 'fitted to the segment' : s.fontSize;
        return [n.localName, n.getAttribute('class'), s.fontFamily, size, s.lineHeight, s.borderTopWidth, s.borderTopStyle,
                s.borderTopColor, s.color, s.textAlign, s.letterSpacing].join('|'); })];
})"""
# The author's own nodes (everything outside the elements; what embed.js adds is inside them).
PAGE_STYLES = """() => [...document.querySelectorAll('h1, body > p, table, th, td, body')].map((n) => { const s = getComputedStyle(n);
    return [n.localName, s.fontFamily, s.fontSize, s.borderTopWidth, s.borderTopColor, s.color, s.backgroundColor,
            s.margin, s.padding, s.boxSizing, s.borderCollapse].join('|'); })"""


def elements(source: str, theme: str | None = None) -> str:
    attrs = f' theme="{theme}"' if theme else ""
    return "".join(f'<he-{name} {source}{attrs}></he-{name}>' for name in ELEMENTS)


def draw_all(page) -> None:
    """Scroll every element on screen (they render when seen) and wait until each has drawn."""
    scroll_through(page)
    for name in ELEMENTS:
        # Scroll by script: Playwright's own scroll waits for the box to hold still, and under load the
        # elements above it (drawing as they come on screen) keep pushing it down for longer than its timeout.
        page.locator(f"he-{name}").evaluate("(node) => node.scrollIntoView({block: 'center'})")
        page.wait_for_selector(f"he-{name}[data-rendered]", state="attached", timeout=20_000)
    page.wait_for_timeout(300)


def inner_styles(page) -> list:
    return page.evaluate(INNER_STYLES % json.dumps(", ".join(f"he-{n}" for n in ELEMENTS)))


def test_hostile_page_css_does_not_reach_inside_and_element_css_does_not_reach_out(page, site_url, author_page):
    plain = author_page("plain.html", html(site_url, elements(f'example="{EXAMPLE}"') + AUTHOR_BODY))
    hostile = author_page("hostile.html", html(site_url, elements(f'example="{EXAMPLE}"') + AUTHOR_BODY, head=HOSTILE))
    bare = author_page("bare.html", html(site_url, AUTHOR_BODY, head=HOSTILE).replace(f'<script type="module" src="{site_url}/static/js/embed.js"></script>', ""))

    page.goto(plain)
    draw_all(page)
    expected = inner_styles(page)
    assert len(expected) == len(ELEMENTS) and all(len(nodes) > 2 for _, nodes in expected), expected

    page.goto(bare)
    page_alone = page.evaluate(PAGE_STYLES)
    assert "30px" in page_alone[0] and "serif" in page_alone[0]  # the hostile CSS does apply to the author's page

    page.goto(hostile)
    draw_all(page)
    got = inner_styles(page)
    for (name, want), (_, have) in zip(expected, got):
        assert have == want, f"<{name}> inside differs on the hostile page: " + json.dumps(
            [(w, h) for w, h in zip(want, have) if w != h][:5], indent=1)
    # A diagram's text is the element's own font, not the page's 30px serif or 18px paragraphs.
    fonts = page.evaluate("""() => { const r = document.querySelector('he-tokens').shadowRoot;
        const s = getComputedStyle(r.querySelector('.he-caption')); return [s.fontFamily, s.fontSize, s.borderTopStyle]; }""")
    assert "serif" != fonts[0] and fonts[1] != "18px" and fonts[2] == "none", fonts
    # Element CSS changes nothing of the author's: their nodes look as on the same page without the diagrams.
    assert page.evaluate(PAGE_STYLES) == page_alone
    assert not page.errors, page.errors


# What embed.js adds around a diagram (step scrubber, live prompt box, export buttons, caption), under CSS aimed at it.
CONTROLS_HOSTILE = ("<style>* { font: 30px serif; border: 3px solid red } p, button, input, label, output, form, textarea"
                    " { font: 30px serif !important; border: 3px solid red !important; padding: 20px; display: block }"
                    " html, body { background: #111; color: #eee }</style>")
CONTROLS_BODY = (f'<he-logits example="{EXAMPLE}" step="2" theme="dark"></he-logits>'
                 '<he-dice prompt="Why is the sky blue?" max_new_tokens="3"></he-dice>')
CONTROL_STYLES = """() => [...document.querySelectorAll('he-logits, he-dice')].flatMap((host) =>
    [...host.shadowRoot.querySelectorAll('.he-controls-above *, .he-controls-below *')].map((n) => { const s = getComputedStyle(n);
        return [host.localName, n.localName, n.getAttribute('class'), n.getAttribute('type'), s.fontFamily, s.fontSize,
                s.borderTopWidth, s.borderTopStyle, s.borderTopColor, s.paddingTop, s.display, s.color, s.backgroundColor].join('|'); }))"""


def controls_drawn(page) -> None:
    page.wait_for_selector("he-logits[data-rendered]", state="attached", timeout=20_000)
    for selector in ("he-logits .he-embed-scrubber", "he-logits .he-export-bar", "he-logits .he-embed-caption[data-state=replay]",
                     "he-dice .he-embed-form", "he-dice .he-export-bar", "he-dice .he-embed-caption"):
        page.wait_for_selector(selector, state="attached", timeout=20_000)
    page.wait_for_timeout(200)


def test_hostile_page_css_does_not_restyle_the_embed_controls_and_they_still_work(page, site_url, author_page):
    """Scrubber, prompt box, export buttons and caption live in the element's shadow root: CSS aimed at p, button,
    input, label does not reach them, they take the element's theme, and pressing them still does what it says."""
    page.goto(author_page("controls-plain.html", html(site_url, CONTROLS_BODY)))
    controls_drawn(page)
    expected = page.evaluate(CONTROL_STYLES)
    kinds = {tuple(row.split("|")[1:4]) for row in expected}
    for kind in [("input", "", "range"), ("output", "he-embed-step", ""), ("label", "", ""),
                 ("input", "", "text"), ("button", "primary", "submit"), ("button", "secondary", "button"),
                 ("p", "he-embed-caption", ""), ("a", "", "")]:
        assert kind in kinds, (kind, kinds)

    page.goto(author_page("controls-hostile.html", html(site_url, CONTROLS_BODY, head=CONTROLS_HOSTILE)))
    controls_drawn(page)
    assert page.evaluate(CONTROL_STYLES) == expected
    assert page.evaluate("document.querySelectorAll('.he-embed-scrubber, .he-embed-form, .he-export-bar, .he-embed-caption').length") == 0
    for row in expected:
        _, tag, _, _, family, size, width, style, colour, padding, *_ = row.split("|")
        assert not family.startswith("serif") and size != "30px" and padding != "20px", row
        assert (width, style, colour) != ("3px", "solid", "rgb(255, 0, 0)"), row
    # The dark theme reaches them from the shared stylesheet (no copy of the colours in embed.css).
    look = page.evaluate("""() => { const r = document.querySelector('he-logits').shadowRoot;
        return [getComputedStyle(r.querySelector('.he-embed-caption')).color, getComputedStyle(r.querySelector('.he-export-bar button')).backgroundColor]; }""")
    assert look == ["rgb(168, 173, 180)", "rgb(30, 32, 36)"], look

    # The scrubber moves the step; the export buttons download; the prompt box runs the visitor's own words.
    logits = page.locator("he-logits")
    scrubber = logits.get_by_role("slider", name="Step")
    expect(logits.locator(".he-embed-step")).to_contain_text("step 2 of")
    scrubber.focus()
    page.keyboard.press("ArrowRight")
    expect(logits).to_have_attribute("step", "3")
    expect(logits).to_have_attribute("data-step", "3")
    expect(logits.locator(".he-embed-step")).to_contain_text("step 3 of")
    for kind, start in (("svg", b"<?xml"), ("png", b"\x89PNG")):
        with page.expect_download(timeout=20_000) as info:
            logits.locator(f"button[data-export={kind}]").click()
        with open(info.value.path(), "rb") as file:
            assert file.read().startswith(start), kind
    dice = page.locator("he-dice")
    dice.get_by_role("textbox", name="Prompt").fill("Why is the grass green?")
    dice.get_by_role("textbox", name="Prompt").press("Enter")
    page.wait_for_selector("he-dice .he-embed-caption[data-state=finished]", timeout=90_000)
    assert "Why is the grass green?" in page.evaluate("document.querySelector('he-dice').data.prefill.template.text")
    dice.scroll_into_view_if_needed()
    page.wait_for_selector("he-dice[data-step]", state="attached", timeout=20_000)
    assert not page.errors, page.errors


# Only the violations come back (resultTypes, and the evaluate returns nothing else): see test_accessibility's AXE_RUN.
CONTRAST = ("tags => axe.run(document, {resultTypes: ['violations'], runOnly: {type: 'rule', values: ['color-contrast']}})"
            ".then((result) => result.violations)")


def contrast_failures(page) -> list:
    page.add_script_tag(content=AXE.read_text())
    result = page.evaluate(CONTRAST, None)
    return [{"target": n["target"], "why": n["failureSummary"][:300]} for v in result for n in v["nodes"]][:20]


# Each case is an axe pass over all 22 elements (~14 s): all four under CI=true (full_range()), else the two where the
# theme is the opposite of the page's background (a theme that leaned on the page's colour fails there).
THEMES_ON_PAGES = [("dark", "#111"), ("light", "#fff"), ("dark", "#fff"), ("light", "#111")]


@pytest.mark.slow
@pytest.mark.parametrize("theme, background", THEMES_ON_PAGES if full_range() else THEMES_ON_PAGES[2:])
def test_every_theme_passes_colour_contrast_in_elements(axe_page, site_url, author_page, theme, background):
    """Whatever the page's own background, a themed element (and the caption beside it) is readable."""
    head = f"<style>html, body {{ background: {background}; color: {'#eee' if background == '#111' else '#111'} }}</style>"
    axe_page.goto(author_page(f"theme-{theme}.html", html(site_url, elements(f'example="{EXAMPLE}"', theme), head=head)))
    draw_all(axe_page)
    colour = axe_page.evaluate("() => getComputedStyle(document.querySelector('he-dice').shadowRoot.querySelector('.he-root')).backgroundColor")
    assert colour == ("rgb(22, 23, 26)" if theme == "dark" else "rgb(253, 253, 252)")  # the theme did apply
    failures = contrast_failures(axe_page)
    assert not failures, json.dumps(failures, indent=1)


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_auto_theme_follows_the_readers_preference(page, site_url, author_page, scheme):
    page.emulate_media(color_scheme=scheme)
    page.goto(author_page("auto.html", html(site_url, elements(f'example="{EXAMPLE}"'))))
    page.locator("he-tokens").scroll_into_view_if_needed()
    page.wait_for_selector("he-tokens[data-rendered]", state="attached", timeout=20_000)
    colour = page.evaluate("() => getComputedStyle(document.querySelector('he-tokens').shadowRoot.querySelector('.he-root')).backgroundColor")
    assert colour == ("rgb(22, 23, 26)" if scheme == "dark" else "rgb(253, 253, 252)")


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_iframe_theme_passes_colour_contrast(axe_page, site_url, theme):
    """`/embed/<section>/?theme=`: the page and its element take the theme; axe finds no contrast failure."""
    axe_page.emulate_media(color_scheme="light" if theme == "dark" else "dark")  # the parameter wins over the preference
    url, _ = record(site_url)
    run_id = url.rsplit("/", 1)[1]
    failures = []
    for section in ELEMENTS:
        axe_page.goto(f"{site_url}/embed/{section}/?run={run_id}&theme={theme}")
        axe_page.wait_for_selector(f"he-{section}[data-rendered]", state="attached", timeout=20_000)
        assert axe_page.get_attribute(f"he-{section}", "theme") == theme
        body = axe_page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert body == ("rgb(22, 23, 26)" if theme == "dark" else "rgb(253, 253, 252)")
        failures += [{"section": section, **f} for f in contrast_failures(axe_page)]
    assert not failures, json.dumps(failures[:20], indent=1)


def test_iframe_theme_must_be_one_of_three(page, site_url):
    response = page.goto(f"{site_url}/embed/tokens/?theme=blue")
    assert response.status == 400


def test_article_in_dark_mode_passes_colour_contrast(axe_page, site_url):
    """The article follows the reader's dark-mode preference, its diagrams too, and stays readable."""
    axe_page.emulate_media(color_scheme="dark")
    axe_page.goto(site_url + "/")
    axe_page.wait_for_selector("he-tokens", state="attached")
    scroll_through(axe_page)
    assert axe_page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(22, 23, 26)"
    axe_page.locator("he-dice").scroll_into_view_if_needed()
    axe_page.wait_for_selector("he-dice[data-rendered]", state="attached", timeout=20_000)
    colour = axe_page.evaluate("() => getComputedStyle(document.querySelector('he-dice').shadowRoot.querySelector('.he-root')).backgroundColor")
    assert colour == "rgb(22, 23, 26)"
    failures = contrast_failures(axe_page)
    assert not failures, json.dumps(failures, indent=1)


def test_hovered_value_shows_in_the_elements_own_readout_line(page, site_url, author_page):
    """The base's readout (what the article's script once patched in beside each diagram) lives inside the element."""
    page.goto(author_page("readout.html", html(site_url, f'<he-tokens example="{EXAMPLE}"></he-tokens>')))
    page.wait_for_selector("he-tokens[data-rendered]", state="attached", timeout=20_000)
    readout = page.locator("he-tokens [part=readout]")
    expect(readout).to_be_hidden()
    chip = page.locator("he-tokens .he-chip").nth(3)
    chip.hover()
    expect(readout).to_be_visible()
    expect(readout).to_have_text(chip.get_attribute("title"))
    assert page.evaluate("document.querySelectorAll('.he-readout').length") == 0  # nothing added to the author's page
    assert not page.errors, page.errors
