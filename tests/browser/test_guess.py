"""Guess mode on the article (issue 26): "Guess each token" beside Play, keyboard only, on a live run and on a
recorded example. Before each pick the page draws nothing of the step (reply, step bar, diagrams); after it, the
step is drawn with the pick marked and the running score counts the picks the way the steps say."""
import json
import re

from playwright.sync_api import expect

from tests.browser.test_workshop import socket_frames

TOKENS = 4


def pick_by_keyboard(page, moves: int) -> str:
    """From the first candidate (focused by the page), arrow `moves` times, then Reveal with the keyboard."""
    card = page.locator("#guess-card")
    expect(card.locator(".quiz-choice")).to_have_count(10)
    expect(card.locator("input[type=radio]").first).to_be_focused()
    for _ in range(moves):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Space")  # the focused radio is the pick (arrows check it too; Space keeps it)
    picked = card.locator("label.quiz-choice:has(input:checked) .quiz-token").inner_text()
    page.keyboard.press("Tab")
    expect(card.locator("button[type=submit]")).to_be_focused()
    page.keyboard.press("Enter")
    expect(card.locator("tr.quiz-mine .quiz-token")).to_have_text(picked)
    return picked


def label(token: dict) -> str:
    return "\u27e8end of reply\u27e9" if token.get("special") else f"\u201c{token['text'].replace(' ', chr(0x2423))}\u201d"


def test_guessing_each_token_of_a_live_run_with_the_keyboard(page, site_url):
    guess_through_a_live_run(page, site_url)


def test_guessing_each_token_of_a_live_smollm2_run(page, smollm2_url):
    """The real chat model, as `make run` serves it: its candidates are words (a leading space shown as ␣)."""
    frames = guess_through_a_live_run(page, smollm2_url, tokens=3)
    first = next(f for f in frames if f["type"] == "step" and f["step"] == 1)
    assert "SmolLM2" in next(f for f in frames if f["type"] == "session")["model"]["name"]
    assert len(first["logits"]["top"]) == 10


def guess_through_a_live_run(page, site_url, tokens=TOKENS) -> list[dict]:
    frames = socket_frames(page)
    page.goto(site_url + "/")
    # connected: Play is enabled (the banner says "Ready" or, once the first example is drawn, "Showing a recorded
    # example": which comes first depends on the machine's load)
    expect(page.locator("#btn-play")).to_be_enabled(timeout=60_000)
    page.locator('#params input[name="max_new_tokens"]').fill(str(tokens))
    page.locator("#guess-mode").check()
    page.locator("#btn-play").focus()
    page.keyboard.press("Enter")
    picks, steps_seen = [], 0
    for n in range(1, tokens + 1):
        expect(page.locator("#guess-card legend")).to_contain_text(f"Step {n}:", timeout=60_000)  # a loaded CI machine
        step = None
        for _ in range(100):  # the step is on the page's socket already: it was computed, not shown
            step = next((f for f in frames if f["type"] == "step" and f["step"] == n), None)
            if step:
                break
            page.wait_for_timeout(100)
        assert step is not None
        assert page.locator("#reply").inner_text() == "".join(  # the reply stops before the step guessed
            f["text_delta"] for f in frames if f["type"] == "step" and f["step"] < n)
        expect(page.locator("#replay-readout")).to_have_text(f"step {n - 1} of {n - 1}")
        picked = pick_by_keyboard(page, n % 3)
        picks.append((picked, step))
        drawn = page.locator("#guess-card tr.quiz-drawn .quiz-token").inner_text()
        assert drawn == label(step["token"])
        expect(page.locator("#replay-readout")).to_have_text(f"step {n} of {n}")
        matched = sum(p == label(s["token"]) for p, s in picks)
        top = sum(p == label(s["logits"]["top"][0]) for p, s in picks)
        expect(page.locator("#guess-card .guess-score")).to_have_text(
            f"You matched the model's pick {matched} of {n} times; you gave its top token {top} of {n}.")
        if step.get("stop_reason"):  # the step that ends the reply says so; `done` follows the run's checks
            expect(page.locator("#guess-next")).to_have_text("The reply has ended")
            expect(page.locator("#guess-next")).to_be_disabled()
            break
        expect(page.locator("#guess-next")).to_be_focused()
        page.keyboard.press("Enter")
    expect(page.locator("#status-banner")).to_contain_text("Finished", timeout=60_000)
    expect(page.locator("#guess-next")).to_have_text("The reply has ended")
    assert page.locator("#reply").inner_text() == next(f for f in frames if f["type"] == "done")["text"]
    assert not page.errors, page.errors
    return frames


def test_guessing_through_a_recorded_example(page, site_url):
    page.goto(site_url + "/")
    expect(page.locator("#replay-bar")).to_be_visible()
    page.locator("#replay-bar [data-replay=first]").click()
    expect(page.locator("#replay-readout")).to_contain_text("step 0 of")
    total = int(re.search(r"of (\d+)", page.locator("#replay-readout").inner_text()).group(1))
    index = json.loads(page.evaluate("() => fetch('/static/examples/index.json').then(r => r.text())"))
    assert total > 2 and index
    page.locator("#guess-mode").check()
    expect(page.locator("#replay-readout")).to_have_text("step 0 of 0")  # nothing ahead to scrub to
    expect(page.locator("#reply")).to_have_text("")
    for n in (1, 2):
        expect(page.locator("#guess-card legend")).to_contain_text(f"Step {n}:")
        pick_by_keyboard(page, 1)
        expect(page.locator("#replay-readout")).to_have_text(f"step {n} of {n}")
        expect(page.locator("#guess-card .guess-score")).to_contain_text(f"of {n} times")
        page.locator("#guess-next").click()
    page.locator("#guess-mode").uncheck()  # off: the whole recording again
    expect(page.locator("#replay-readout")).to_contain_text(f"of {total}")
    expect(page.locator("#guess-card")).to_be_hidden()
