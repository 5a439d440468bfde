"""Embeds when things go wrong, and an author's own words (issue 27, points 5 and 7): a server out of reach, a
recording that cannot load, the author's caption, and iframe code that names its section and may copy."""
import os

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ROOT
from tests.support import free_port
from tests.browser.test_embed import author_page, console_errors, html  # noqa: F401 (fixtures)

FALLBACK = '<p class="mine">A picture of the dice, for readers without the server.</p>'
EXAMPLE = "biopsy"


def controls(page, name: str) -> dict:
    """Which of the script's controls the element shows: scrubber, export bar, caption (hidden ones count as absent)."""
    return page.locator(name).evaluate("""(node) => {
      const shown = (sel) => [...node.shadowRoot.querySelectorAll(sel)].some((n) => n.checkVisibility());
      return { scrubber: shown('.he-embed-scrubber'), bar: shown('.he-export-bar'), caption: shown('.he-embed-caption'),
               figure: node.shadowRoot.querySelector('.he-figure').checkVisibility(), height: node.getBoundingClientRect().height };
    }""")


EXPECTED = ("Failed to load resource", "WebSocket connection to")  # what these tests cause: a 404, a socket refused


@pytest.fixture
def quiet_console(console_errors):
    """A recording that 404s, a socket that cannot open: the browser logs those, and they are what the test causes."""
    yield console_errors
    console_errors[:] = [e for e in console_errors if not any(x in e for x in EXPECTED)]


def test_a_recording_that_cannot_load_shows_only_the_fallback(page, site_url, author_page, quiet_console):
    body = f'<he-dice run="no-such-run">{FALLBACK}</he-dice><he-logits run="no-such-run"></he-logits>'
    page.goto(author_page("failed.html", html(site_url, body)))
    expect(page.locator("he-logits").locator(".he-embed-caption")).to_contain_text("The recording could not be loaded", timeout=20_000)
    expect(page.locator("he-dice .mine")).to_be_visible()
    for name in ("he-dice", "he-logits"):  # each element takes the failure in on its own: wait for both
        expect(page.locator(name)).to_have_attribute("data-he-failed", "")
    with_fallback, without = controls(page, "he-dice"), controls(page, "he-logits")
    assert not (with_fallback["scrubber"] or with_fallback["bar"] or with_fallback["caption"]), with_fallback
    assert not (without["scrubber"] or without["bar"]) and without["caption"], without  # the reason, for the author
    assert without["height"] < 150, without  # no reserved box kept for a diagram that cannot come


def test_a_live_embed_whose_server_is_gone_says_so_and_shows_its_fallback(page, author_page, tmp_path, quiet_console):
    """The script from a copy of static/ on a server with no Hit Enter behind it: the socket can never open."""
    os.symlink(ROOT / "static", tmp_path / "static")
    url = author_page("live.html", "placeholder")
    origin = url.rsplit("/", 1)[0]
    body = (f'<he-dice prompt="Why is the sky blue?" autostart>{FALLBACK}</he-dice>'
            '<he-tokens prompt="Why is the sky blue?" controls="scrubber"></he-tokens>')
    page.goto(author_page("live.html", html(origin, body)))
    expect(page.locator("he-dice").locator(".he-embed-caption")).to_contain_text("Connecting to the server", timeout=20_000)
    gone = f"The Hit Enter server at {origin.split('//')[1]} is not reachable; retrying."
    expect(page.locator("he-dice").locator(".he-embed-caption")).to_contain_text(gone, timeout=30_000)
    expect(page.locator("he-dice .mine")).to_be_visible()
    dice = controls(page, "he-dice")
    assert not dice["figure"] and not dice["bar"] and dice["caption"], dice  # the fallback in the diagram's place
    expect(page.locator("he-tokens").locator(".he-embed-caption")).to_contain_text(gone)


def test_a_live_embed_whose_server_is_gone_shows_the_recording_given_as_its_fallback(page, author_page, tmp_path, quiet_console):
    """A recording as the fallback (an element replaying it, inside the live one): once the server is said to be
    gone it is drawn in the live diagram's place, from the author's copy of static/ (issue 27 point 5)."""
    os.symlink(ROOT / "static", tmp_path / "static")
    url = author_page("live.html", "placeholder")
    origin = url.rsplit("/", 1)[0]
    body = (f'<he-dice prompt="Why is the sky blue?" autostart id="live">'
            f'<he-dice example="{EXAMPLE}" step="2" controls="none" caption="off" id="recorded"></he-dice></he-dice>')
    page.goto(author_page("live.html", html(origin, body)))
    gone = f"The Hit Enter server at {origin.split('//')[1]} is not reachable; retrying."
    expect(page.locator("#live").locator(".he-embed-caption").first).to_contain_text(gone, timeout=30_000)
    page.wait_for_selector("#recorded[data-rendered]", state="attached", timeout=20_000)
    expect(page.locator("#recorded")).to_be_visible()
    assert page.get_attribute("#recorded", "data-step") == "2"
    assert not controls(page, "#live")["figure"]


def test_an_iframe_whose_server_is_down_gives_its_reserved_box_back(page, site_url, author_page, quiet_console):
    """The reserved 700-odd px stay for an iframe whose server answers; one whose server is gone loads the browser's
    error page and never says its height: its box goes back to the iframe's own height, the error in view."""
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    head = f'<link rel="stylesheet" href="{site_url}/static/css/embed.css">'
    body = (f'<iframe id="down" data-he-embed src="{gone}/embed/dice/?example={EXAMPLE}" title="dice"></iframe>'
            f'<iframe id="up" data-he-embed src="{site_url}/embed/dice/?example={EXAMPLE}" title="dice"></iframe>')
    page.goto(author_page("frames.html", html(site_url, body, head=head)))
    reserved = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#down')).minHeight)")
    assert reserved > 500, reserved  # embed.css reserves the dice's height from the first paint
    expect(page.locator("#down")).to_have_attribute("data-he-failed", "", timeout=20_000)
    assert page.evaluate("document.querySelector('#down').getBoundingClientRect().height") < 200
    page.wait_for_function("() => document.querySelector('#up').style.height", timeout=30_000)
    assert page.get_attribute("#up", "data-he-failed") is None
    assert page.evaluate("document.querySelector('#up').getBoundingClientRect().height") > 500


def test_an_authors_caption_replaces_the_scripts_as_text(page, site_url, author_page):
    words = 'Figure 3: the dice at step 2 <b>of</b> "my" run'
    body = f'<he-dice example="{EXAMPLE}" step="2" caption="{words.replace(chr(34), "&quot;").replace("<", "&lt;")}"></he-dice>'
    page.goto(author_page("caption.html", html(site_url, body)))
    caption = page.locator("he-dice").locator(".he-embed-caption")
    expect(caption.locator(".he-embed-status")).to_have_text(words, timeout=20_000)
    assert caption.locator("b").count() == 0  # text, never HTML
    expect(caption.locator("a")).to_have_text("Hit Enter — full article")


def test_iframe_code_names_the_section_and_may_copy_inside_the_frame(page, site_url, author_page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    page.goto(f"{site_url}/embed/dice/?example={EXAMPLE}&step=2")
    page.locator("he-dice .he-export-bar button[data-export=embed]").click()
    expect(page.locator("he-dice .he-export-status")).to_have_text("Embed code copied.", timeout=20_000)
    snippet = page.evaluate("navigator.clipboard.readText()")
    assert 'title="Hit Enter: Rolling the dice"' in snippet and 'allow="clipboard-write"' in snippet, snippet

    url = author_page("framed.html", html(site_url, snippet.split("\n")[0]))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url.rsplit("/", 1)[0])
    page.goto(url)
    frame = page.frame_locator("iframe[data-he-embed]")
    frame.locator("he-dice[data-rendered]").wait_for(state="attached", timeout=20_000)
    frame.locator("he-dice .he-export-bar button[data-export=embed]").click()
    expect(frame.locator("he-dice .he-export-status")).to_have_text("Embed code copied.")  # no text box fallback
