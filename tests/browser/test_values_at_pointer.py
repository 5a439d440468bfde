"""Values at the pointer (issue 23, point 10): every diagram that shows values puts the hovered or focused mark's
value in a box right beside it (not in a readout line far below), inside the viewport, and the keyboard reaches
the marks (one tab stop, arrow keys) with the value announced by an aria-live readout."""
import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_examples import example, silent_socket
from tests.browser.test_article import collect_frames
from tests.browser.test_export import unpack

NEAR = 80  # px: the most the value box may lie from its mark


def js_number(x: float) -> str:
    """A payload number as the page prints it with String(x)."""
    return str(int(x)) if float(x).is_integer() else repr(x)


def embedding_value(run: dict, title: str) -> None:
    """The first cell's value in its title is the payload's first embedding number (row 0, dim 0)."""
    v = float(unpack(run["prefill"]["embeddings"]["slice"])[0, 0])
    token = run["prefill"]["tokens"][0]
    match = re.search(rf"row {token['id']} dim 0: (-?[\d.]+)$", title)
    assert match and abs(float(match.group(1)) - v) < 6e-5, (title, v)


def contains(text_of):
    """A check that the mark's title holds `text_of(run)`."""
    def check(run: dict, title: str) -> None:
        assert text_of(run) in title, (text_of(run), title)
    return check


# element: (its value marks in order, the check of the first mark's title against the recorded payload (step 1))
SECTIONS = {
    "he-kv": (".he-barlist .he-brow", contains(lambda r: f"layer 1: {r['steps'][0]['kv']['layers'][0]['bytes']:,} bytes")),
    "he-stages": (".he-col:first-of-type .he-srow", contains(
        lambda r: f"(id {r['steps'][0]['logits']['top'][0]['id']}) logit {js_number(r['steps'][0]['logits']['top'][0]['logit'])}")),
    "he-dice": (".he-dicebar .he-seg", contains(
        lambda r: f"(id {r['steps'][0]['probs'][0]['id']}) p = {js_number(r['steps'][0]['probs'][0]['prob'])}")),
    "he-embeddings": (".he-row:not(.he-row-head) :is(.he-cell, .norm)", embedding_value),
    "he-logits": (".he-lrow", contains(
        lambda r: f"(id {r['steps'][0]['logits']['top'][0]['id']}): raw logit {js_number(r['steps'][0]['logits']['top'][0]['logit'])}")),
    "he-filter": (".he-filter:first-of-type .he-chips .he-chip", contains(lambda r: f"(id {r['steps'][0]['logits']['top'][0]['id']}): logit")),
    "he-layers": (".he-lens tbody td", contains(lambda r: f"guess 1: {json.dumps(r['steps'][0]['lens'][0]['texts'][0], ensure_ascii=False)} id ")),
    "he-positions": (".he-clock-row:not(.he-row-head) .col", contains(
        lambda r: f"position 0, pair {r['prefill']['positions']['rotary']['freq_index'][0]}: ")),
}


def gap(a: dict, b: dict) -> float:
    """The distance between two boxes (0 when they touch or overlap)."""
    dx = max(0, b["x"] - (a["x"] + a["width"]), a["x"] - (b["x"] + b["width"]))
    dy = max(0, b["y"] - (a["y"] + a["height"]), a["y"] - (b["y"] + b["height"]))
    return max(dx, dy)


# Where a diagram can show a value: a tip beside the mark, or a readout line (the old place, often off screen).
VALUE_BOXES = ".he-tip, .he-readout"


def tip_beside(page, section, mark) -> None:
    """A box showing `mark`'s title lies within NEAR px of it, wholly inside the viewport."""
    title = mark.get_attribute("title")
    shown = section.locator(VALUE_BOXES).filter(has_text=re.compile(f"^{re.escape(title)}$"), visible=True)
    expect(shown.first).to_be_visible()
    at = mark.bounding_box()
    boxes = [b for b in (n.bounding_box() for n in shown.all()) if b]
    assert boxes and at, f"{title!r}: the mark or its value went away (a redraw?)"
    box = min(boxes, key=lambda b: gap(b, at))
    assert gap(box, at) <= NEAR, f"{title!r}: the nearest box showing it is {gap(box, at):.0f} px from the mark"
    width = page.viewport_size["width"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, (box, width)  # not cut off at the edge


def announced(section, mark) -> None:
    """The section's aria-live readout says `mark`'s value."""
    live = section.locator(".he-readout[aria-live=polite]:not(.he-title-readout)")
    title = mark.get_attribute("title")
    expect(live.filter(has_text=re.compile(f"^{re.escape(title)}$")), f"no aria-live readout says {title!r}").to_have_count(1)


def check_section(page, run: dict, name: str, sections: dict = SECTIONS) -> None:
    """Hover the first mark, then move by keyboard to the second one: the value follows, beside it."""
    selector, check = sections[name]
    section = page.locator(name)
    section.scroll_into_view_if_needed()
    marks = section.locator(selector)
    expect(marks.nth(1)).to_be_visible(timeout=60_000)
    first, second = marks.nth(0), marks.nth(1)
    check(run, first.get_attribute("title"))
    first.hover()
    tip_beside(page, section, first)
    # One tab stop per group of marks (roving tabindex): the first mark takes it; arrows move it on.
    assert first.evaluate("n => n.tabIndex") == 0 and second.evaluate("n => n.tabIndex") == -1, name
    first.focus()
    page.keyboard.press("ArrowRight")
    expect(second).to_be_focused()
    assert second.evaluate("n => n.tabIndex") == 0 and first.evaluate("n => n.tabIndex") == -1, name
    tip_beside(page, section, second)
    announced(section, second)


def checked(page, run: dict, sections: dict) -> dict:
    """Every section of `sections` checked (check_section); those that failed, with why."""
    failed = {}
    for name in sections:  # every section is checked, and every one that fails is named
        try:
            check_section(page, run(name) if callable(run) else run, name, sections)
        except AssertionError as exc:
            failed[name] = str(exc).splitlines()[0][-160:]
    return failed


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_every_value_shows_beside_its_mark_and_follows_the_keyboard(browser, site_url, width):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    silent_socket(page)  # the shipped example is drawn: its payloads are what the marks must say
    run = example(0)
    page.goto(site_url + "/")
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {len(run['steps'])}")
    # The reader's first scroll fetches the whole example, which redraws every diagram: a mark hovered before that
    # redraw is replaced under the pointer (CI run 28). Scroll once, then check the marks of the whole example.
    page.mouse.wheel(0, 1)
    page.wait_for_selector("#example-bar[data-whole]", state="attached", timeout=30_000)
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    failed = checked(page, run, SECTIONS)
    assert not failed, "\n".join(f"{name}: {why}" for name, why in failed.items())
    assert not errors, errors
    context.close()


def test_tab_reaches_the_kv_bars_and_hover_is_beside_the_bar(page, site_url):
    """From the cache's numbers, one Tab lands on its first layer bar (the numbers are one tab stop too)."""
    silent_socket(page)
    page.goto(site_url + "/")
    kv = page.locator("he-kv")
    kv.scroll_into_view_if_needed()
    bars = kv.locator(".he-barlist .he-brow")
    expect(bars.first).to_be_visible(timeout=20_000)
    # the scroll fetched the whole example, which redraws the diagrams: focus once it is in, as a reader would
    page.wait_for_selector("#example-bar[data-whole]", state="attached", timeout=30_000)
    # its redraw comes on the next animation frame (base-element.js): a mark focused before it would be replaced
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    kv.locator(".he-stats > div").first.focus()
    tip_beside(page, kv, kv.locator(".he-stats > div").first)
    page.keyboard.press("Tab")
    expect(bars.first).to_be_focused()
    tip_beside(page, kv, bars.first)
    announced(kv, bars.first)
    page.keyboard.press("End")
    expect(bars.last).to_be_focused()
    tip_beside(page, kv, bars.last)
    assert not page.errors, page.errors


# The sections the server measures on sight (their payload is its `serving` message): element: (what, marks, check).
# he-quant draws with the same bars and numbers as he-batch (lib/measure.js); its measurement is left out here:
# on a shared CPU it did not come within minutes.
MEASURED = {
    "he-kvcalc": ("kv", "tbody :is(th, td)", lambda d, title: d["rows"][0]["name"] in title),
    "he-batch": ("batch", ".he-barlist-measured .he-brow", lambda d, title: f"= {js_number(d['runs'][0]['tokens_per_s'])} tokens/s" in title),
}


def test_measured_sections_show_their_values_beside_the_mark_too(page, site_url):
    frames = collect_frames(page)
    page.goto(site_url + "/")

    def data(name: str) -> dict:
        """The section's payload, once the server measured it (the section asks when it comes on screen)."""
        page.locator(name).scroll_into_view_if_needed()
        what = MEASURED[name][0]
        expect(page.locator(name).locator(MEASURED[name][1]).first).to_be_visible(timeout=120_000)
        return next(f["data"] for f in reversed(frames) if f.get("type") == "serving" and f.get("what") == what)

    def check_of(name: str):
        def check(d: dict, title: str) -> None:
            assert MEASURED[name][2](d, title), (name, title)
        return check

    # Every measurement in first: each answer redraws the page's diagrams, and a redraw takes the focus away.
    answers = {name: data(name) for name in MEASURED}
    sections = {name: (marks, check_of(name)) for name, (_, marks, _) in MEASURED.items()}
    failed = checked(page, answers.get, sections)
    assert not failed, "\n".join(f"{name}: {why}" for name, why in failed.items())
    assert not page.errors, page.errors
