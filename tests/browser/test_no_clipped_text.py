"""No clipped text, and number agreement (issue 23, point 11): on a finished run, at desktop and phone widths and in
both themes, no text in the article or its diagrams is cut off by its box or the viewport (tests/browser/clipped.js
says what counts), the status banner wraps a long error whole, and no prose says "1 steps"."""
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_long_prompt import LONG_PROMPT

CLIPPED = (Path(__file__).parent / "clipped.js").read_text()
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
# The text the page shows, as laid out (innerText: blocks on their own lines), the diagrams' shadow roots included
# (a host's innerText stops at its shadow root).
VISIBLE_TEXT = """() => {
  const parts = [document.body.innerText];
  const walk = (root) => {
    for (const node of root.querySelectorAll("*")) {
      if (!node.shadowRoot) continue;
      for (const child of node.shadowRoot.children) if (child.innerText) parts.push(child.innerText);
      walk(node.shadowRoot);
    }
  };
  walk(document);
  return parts.join("\\n");
}"""
ONE_PLURAL = re.compile(r"(?<![\d.,])1 (steps|layers|tokens|positions|messages|heads|blocks|rows|passes|characters|keys)\b")


@pytest.fixture
def themed(browser, request):
    """A page at the test's viewport and colour scheme (its id: "desktop-dark" and so on)."""
    size, scheme = request.param.split("-")
    context = browser.new_context(viewport=VIEWPORTS[size], color_scheme=scheme)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"clipped-{request.param}.png"), full_page=True)
    context.close()


def drawn(page) -> None:
    """Scroll every diagram on screen (each renders only then) and wait until it has drawn the run."""
    for element in page.locator("article he-pipeline, article section [data-rendered], article section :is("
                                "he-template, he-tokens, he-embeddings, he-positions, he-mask, he-attention, he-layers, "
                                "he-logits, he-stages, he-filter, he-dice, he-sequence, he-kv, he-stream, he-stop, he-context, "
                                "he-myths, he-timeline, he-kvcalc, he-batch, he-speculative, he-quant)").all():
        element.scroll_into_view_if_needed()
        expect(element).to_have_attribute("data-rendered", re.compile(r"\d"), timeout=30_000)
    page.evaluate("window.scrollTo(0, 0)")


def clipped(page) -> list[str]:
    """What clipped.js finds cut off, one line each (where, the text, why)."""
    return [f"{c['where']}: {c['text']!r}: {c['why']}" for c in page.evaluate(CLIPPED)]


@pytest.mark.parametrize("themed", ["desktop-light", "desktop-dark", "phone-light", "phone-dark"], indirect=True)
def test_a_finished_run_clips_no_text(themed, site_url):
    page = themed
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=8)
    assert not run["error"], run["error"]
    drawn(page)
    found = clipped(page)
    assert not found, "clipped text:\n" + "\n".join(found)
    assert not page.errors, page.errors


@pytest.mark.parametrize("themed", ["desktop-light", "phone-dark"], indirect=True)
def test_the_error_banner_wraps_its_whole_message(themed, site_url):
    """A refused prompt (past the server's cap) is said in full in the sticky bar, on as many lines as it takes."""
    page = themed
    frames = collect_frames(page)
    page.goto(site_url + "/")
    page.locator("#messages textarea").first.fill(LONG_PROMPT + " " + LONG_PROMPT)
    page.locator("#btn-play").click()
    banner = page.locator("#status-banner")
    expect(banner).to_have_attribute("data-kind", "error", timeout=60_000)
    expect(banner).to_contain_text("the model's own context window is")  # the end of the message, not an ellipsis
    expect(banner).to_contain_text("Change it and press Play again. (out_of_range)")  # what to do now (error-words.js)
    lines = banner.evaluate("e => e.clientHeight / parseFloat(getComputedStyle(e).lineHeight)")
    assert lines > 1.8, "a message this long takes more than one line"
    assert [c for c in clipped(page) if "status-banner" in c] == []


def test_one_step_reads_singular(page, site_url):
    """A run of one token: "after 1 step", never "1 steps", anywhere on the page."""
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=1)
    assert not run["error"], run["error"]
    assert len(run["step"]) == 1
    drawn(page)
    text = page.evaluate(VISIBLE_TEXT)
    assert "after 1 step" in text
    assert [m.group(0) for m in ONE_PLURAL.finditer(text)] == []
