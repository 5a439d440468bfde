"""Themes that follow the author (issue 27, point 6): two custom properties recolour everything inside a diagram
with its contrast kept, a page-wide default theme comes from a <meta> (or the script tag), and `theme="auto"`
follows the page's own color-scheme before the reader's preference."""
import json

import pytest

from tests.browser.test_accessibility import axe_page  # noqa: F401 (a fixture)
from tests.browser.test_embed import author_page, html  # noqa: F401 (author_page is a fixture)
from tests.browser.test_isolation import ELEMENTS, EXAMPLE, contrast_failures, draw_all, elements
from tests.conftest import full_range

DARK, LIGHT = "rgb(22, 23, 26)", "rgb(253, 253, 252)"  # the dark and light themes' own backgrounds
ALL = ", ".join(f"he-{name}" for name in ELEMENTS)
# An author's palettes: only a background and a text colour each.
PALETTES = [("#222", "#eee"), ("#fdf6e3", "#333"), ("#002b36", "#93a1a1"), ("#ffffff", "#000000"), ("#1e1e2e", "#cdd6f4")]
# An endurance grid (marked slow; each case is an axe pass over all 22 elements, ~15 s): every palette on both
# schemes under CI=true (full_range()); otherwise the cases where the palette is the opposite of the reader's
# scheme (the ones that fail when a surface keeps its scheme's colour), two dark palettes on a light
# scheme and two light ones on a dark scheme.
CROSSED = {("#222", "light"), ("#ffffff", "dark"), ("#002b36", "light"), ("#fdf6e3", "dark")}
CASES = [(b, t, scheme) for b, t in PALETTES for scheme in ("light", "dark") if full_range() or (b, scheme) in CROSSED]

# A colour as the canvas paints it (computed colours may be oklab(), color(srgb …) or rgb()): [r, g, b] 0–255.
RGB = """(colour) => { const c = document.createElement('canvas').getContext('2d');
    c.fillStyle = '#000'; c.fillStyle = colour; c.fillRect(0, 0, 1, 1); return [...c.getImageData(0, 0, 1, 1).data].slice(0, 3); }"""
# Each element's root background, by element name.
ROOTS = """() => Object.fromEntries([...document.querySelectorAll('%s')].map((e) => [e.id || e.localName,
    getComputedStyle(e.shadowRoot.querySelector('.he-root')).backgroundColor]))""" % ALL


def styled(page) -> None:
    """Every element defined, its shadow root styled (the root shows once elements.css is in)."""
    page.wait_for_function("""() => [...document.querySelectorAll('%s')].every((e) => e.shadowRoot?.adoptedStyleSheets.length
        && !e.shadowRoot.querySelector('.he-root').hidden)""" % ALL, timeout=20_000)


def luminance(rgb) -> float:
    c = [v / 255 for v in rgb]
    c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def painted(page, host: str, selector: str, prop: str = "backgroundColor") -> list:
    colour = page.evaluate(f"() => getComputedStyle(document.querySelector('{host}').shadowRoot.querySelector('{selector}')).{prop}")
    return page.evaluate(RGB, colour)


def interact(page) -> None:
    """What only shows on use: a hovered chip's readout line, a linked (highlighted) chip, a clicked heat-map cell's tip."""
    chip = page.locator("he-tokens .he-chip").nth(2)
    chip.evaluate("(node) => node.scrollIntoView({block: 'center'})")
    chip.hover()
    # The class lib/widgets.js linkIds() gives every chip of the hovered id (set here: its hover is not what is tested).
    page.locator("he-stages .he-chip").first.evaluate("(node) => node.classList.add('he-linked')")
    cell = page.locator("he-mask .he-matrix .he-cell").first
    cell.evaluate("(node) => node.scrollIntoView({block: 'center'})")
    cell.click()
    page.wait_for_selector("he-mask .he-tip:not([hidden])", state="attached", timeout=5_000)
    page.wait_for_timeout(200)


@pytest.mark.slow
@pytest.mark.parametrize("background, text, scheme", CASES)
def test_two_author_colours_recolour_everything_with_contrast_kept(axe_page, site_url, author_page, background, text, scheme):
    """Only --he-background and --he-color set, on a reader's light or dark preference (the palette may be the
    opposite of the element's scheme): chips, readouts, highlights, buttons, inputs, rows and tips follow, and
    axe-core finds no colour-contrast failure."""
    axe_page.emulate_media(color_scheme=scheme)
    head = (f"<style>html, body {{ background: {background}; color: {text} }}"
            f" {ALL} {{ --he-background: {background}; --he-color: {text} }}</style>")
    name = f"palette-{background[1:]}-{scheme}.html"
    axe_page.goto(author_page(name, html(site_url, elements(f'example="{EXAMPLE}"'), head=head)))
    draw_all(axe_page)
    interact(axe_page)
    want = axe_page.evaluate(RGB, background)
    assert painted(axe_page, "he-dice", ".he-root") == want  # the author's background did apply
    # The surfaces follow the background's side (a dark page gets dark chips and buttons, a light one light).
    dark = luminance(want) < 0.18
    for host, selector in [("he-tokens", ".he-chip"), ("he-dice", ".he-export-bar button"), ("he-kvcalc", ".he-form input"),
                           ("he-tokens", ".he-readout"), ("he-dice", ".he-chosen-row td"), ("he-stages", ".he-linked")]:
        seen = luminance(painted(axe_page, host, selector))
        assert (seen < 0.18) == dark, (host, selector, seen, background)
    failures = contrast_failures(axe_page)
    assert not failures, json.dumps(failures, indent=1)


@pytest.mark.parametrize("how", ["meta", "script"])
def test_a_page_wide_default_theme_sets_every_element_without_its_own(page, site_url, author_page, how):
    """<meta name="hit-enter-theme" content="dark"> (or data-theme on embed.js's tag) makes every element dark,
    elements added later too; an element's own theme="light" still wins, and its own theme="auto" follows the page."""
    page.emulate_media(color_scheme="light")
    body = (elements(f'example="{EXAMPLE}"') + f'<he-dice id="own-light" example="{EXAMPLE}" theme="light"></he-dice>'
            f'<he-dice id="own-auto" example="{EXAMPLE}" theme="auto"></he-dice>')
    source = html(site_url, body, head='<meta name="hit-enter-theme" content="dark">' if how == "meta" else "")
    if how == "script":
        source = source.replace('<script type="module" ', '<script data-theme="dark" type="module" ')
    page.goto(author_page(f"default-{how}.html", source))
    page.wait_for_selector("he-tokens[data-rendered]", state="attached", timeout=20_000)
    styled(page)
    roots = page.evaluate(ROOTS)
    assert roots.pop("own-light") == LIGHT
    assert roots.pop("own-auto") == LIGHT  # its own "auto": the page sets no color-scheme, the reader prefers light
    assert set(roots.values()) == {DARK}, roots
    # A chip inside is dark too (not the light theme's white chip on a dark box).
    chip = page.evaluate(RGB, page.evaluate("getComputedStyle(document.querySelector('he-tokens').shadowRoot.querySelector('.he-chip')).backgroundColor"))
    assert luminance(chip) < 0.05, chip
    # An element the page adds later takes the default as well.
    page.evaluate(f"""() => {{ const e = document.createElement('he-logits'); e.id = 'later';
        e.setAttribute('example', '{EXAMPLE}'); document.body.append(e); }}""")
    page.wait_for_selector("#later[data-rendered]", state="attached", timeout=20_000)
    assert page.evaluate(ROOTS)["later"] == DARK
    assert not page.errors, page.errors


@pytest.mark.parametrize("how", ["css", "meta"])
def test_auto_follows_the_pages_color_scheme_before_the_readers(page, site_url, author_page, how):
    """The reader prefers light, the page says dark (:root { color-scheme: dark } or <meta name="color-scheme">):
    elements with no theme, or theme="auto", are dark; the page switching its scheme later switches them back."""
    page.emulate_media(color_scheme="light")
    head = "<style>:root { color-scheme: dark }</style>" if how == "css" else '<meta name="color-scheme" content="dark">'
    body = elements(f'example="{EXAMPLE}"') + f'<he-dice id="own-auto" example="{EXAMPLE}" theme="auto"></he-dice>'
    page.goto(author_page(f"page-scheme-{how}.html", html(site_url, body, head=head)))
    styled(page)
    assert set(page.evaluate(ROOTS).values()) == {DARK}
    # The page turns light (its own switch): the diagrams follow; a page of "light dark" leaves it to the reader.
    if how == "css":
        page.evaluate("document.documentElement.style.colorScheme = 'light'")
    else:
        page.evaluate("document.querySelector('meta[name=color-scheme]').content = 'light'")
    page.wait_for_function(f"() => Object.values(({ROOTS})()).every((c) => c === '{LIGHT}')", timeout=5_000)
    page.emulate_media(color_scheme="dark")
    if how == "css":
        page.evaluate("document.documentElement.style.colorScheme = 'light dark'")
    else:
        page.evaluate("document.querySelector('meta[name=color-scheme]').content = 'light dark'")
    page.wait_for_function(f"() => Object.values(({ROOTS})()).every((c) => c === '{DARK}')", timeout=5_000)
    assert not page.errors, page.errors
