"""Issue 23: the logit lens at every layer for the step shown, without a click (live, in a saved run and in the
examples); the examples to their end; the prose's example words are the visitor's, one word said as one."""
import json
import re

from playwright.sync_api import expect

from tests.browser.test_article import run_prompt
from tests.browser.test_examples import INDEX, example, silent_socket

LAYERS = 30  # SmolLM2-135M
LENS_ROWS = "table.he-lens tbody tr"


def frames_both_ways(page) -> tuple[list[dict], list[dict]]:
    """The page socket's frames: (received, sent)."""
    received, sent = [], []

    def on_socket(ws):
        ws.on("framereceived", lambda payload: received.append(json.loads(payload)))
        ws.on("framesent", lambda payload: sent.append(json.loads(payload)))

    page.on("websocket", on_socket)
    return received, sent


def lens_asked(sent: list[dict]) -> list[dict]:
    return [f for f in sent if f.get("type") == "detail" and f.get("what") == "lens"]


def steps_asked(page, sent: list[dict], steps: list[int]) -> None:
    """Wait (up to 10 s) until the page's lens requests, in order, were for `steps`; fail naming what was sent."""
    for _ in range(100):
        if [f["step"] for f in lens_asked(sent)] == steps:
            return
        page.wait_for_timeout(100)
    assert [f["step"] for f in lens_asked(sent)] == steps


def test_the_layers_section_reads_every_layer_of_the_step_shown_on_smollm2(page, smollm2_url):
    received, sent = frames_both_ways(page)
    run = run_prompt(page, smollm2_url, received, text="How do rainbows form?", max_new_tokens=3)
    assert not run["error"], run["error"]
    assert len(run["prefill"][-1]["lens"]) < LAYERS  # the run itself sends a few layers: decoding stays fast
    assert lens_asked(sent) == []  # nothing asked while the section was off screen
    # Point 2 on the template that adds its own system prompt: the prose quotes the visitor's words, never it.
    expect(page.locator("#mask .run-words-many")).to_contain_text(
        'In "How do rainbows form", "rainbows" cannot look ahead at "form"')
    for section in ("#embeddings", "#mask", "#myths"):
        text = page.locator(section).inner_text()
        assert "helpful" not in text and "trained by Hugging Face" not in text, (section, text)
    n = len(run["step"])
    layers = page.locator("he-layers")
    layers.scroll_into_view_if_needed()
    expect(layers.locator(LENS_ROWS)).to_have_count(LAYERS, timeout=60_000)  # no click
    expect(layers.get_by_role("button", name=re.compile("Read all"))).to_have_count(0)
    assert [(f["step"], "auto" in f) for f in lens_asked(sent)] == [(n, False)]  # once, for the step shown
    page.locator("[data-replay=prev]").click()
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(n - 1))
    expect(layers.locator(LENS_ROWS)).to_have_count(LAYERS, timeout=60_000)
    expect(layers).to_contain_text(f"Prediction for step {n - 1} of {n}")
    # Its rows came from that request's answer; Playwright may hand the page's sent frame to this test a moment later
    steps_asked(page, sent, [n, n - 1])
    page.locator("[data-replay=next]").click()  # back to a step already read: not asked again
    expect(layers.locator(LENS_ROWS)).to_have_count(LAYERS)
    page.wait_for_timeout(600)  # past the settle delay: a second request would have gone by now
    assert [f["step"] for f in lens_asked(sent)] == [n, n - 1]

    # The saved run carries what was read: its replay shows every layer at those steps, and is still verified.
    page.locator("#btn-save").click()
    expect(page.locator("#permalink")).to_have_attribute("href", re.compile("/runs/"))
    link = page.locator("#permalink").get_attribute("href")
    page.goto(f"{smollm2_url}{link}#step={n - 1}")
    layers = page.locator("he-layers")
    layers.scroll_into_view_if_needed()
    expect(layers).to_contain_text(f"Prediction for step {n - 1} of {n}")
    expect(layers.locator(LENS_ROWS)).to_have_count(LAYERS)
    expect(page.locator(".recording-origin")).to_have_attribute("data-verified", "true")
    assert not page.errors, page.errors


def test_the_first_example_runs_to_its_end_with_every_layer_and_loads_in_two_parts(page, site_url):
    silent_socket(page)
    fetched = []
    page.on("requestfinished", lambda r: fetched.append(r.url.rsplit("/", 1)[-1]))
    run = example(0)
    n = len(run["steps"])
    assert run["done"]["stop_reason"] == "eos" or n == run["session"]["params"]["max_new_tokens"]
    assert n > 8  # not cut short (it was 4 tokens, "The mole on your")
    page.goto(site_url + "/")
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")
    assert page.locator("#reply").inner_text().strip() == run["done"]["text"].strip()
    assert INDEX[0]["first_paint"] in fetched and INDEX[0]["file"] not in fetched  # the light file first
    page.mouse.wheel(0, 300)  # the first scroll brings the whole file (each step's attention rows)
    for _ in range(200):
        if INDEX[0]["file"] in fetched:
            break
        page.wait_for_timeout(100)
    assert INDEX[0]["file"] in fetched
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")  # the visitor's step kept
    layers = page.locator("he-layers")
    layers.scroll_into_view_if_needed()
    expect(layers.locator(LENS_ROWS)).to_have_count(LAYERS)  # recorded at every layer: a replay cannot ask
    expect(layers.get_by_role("button", name=re.compile("Read all"))).to_have_count(0)
    assert not page.errors, page.errors


def test_a_one_word_prompt_is_said_as_one_word_not_the_articles_mole(page, site_url):
    received, _ = frames_both_ways(page)
    run = run_prompt(page, site_url, received, text="Rainbows", max_new_tokens=2)
    assert not run["error"], run["error"]
    mask = page.locator("#mask")
    expect(mask.locator(".run-words-one")).to_be_visible()
    expect(mask.locator(".run-words-one")).to_contain_text('You typed one word, "Rainbows"')
    expect(mask.locator(".run-words-many")).to_be_hidden()
    assert "mole" not in mask.locator("p").nth(1).inner_text()
    expect(page.locator("#myths .run-words-one").first).to_be_visible()
    # Two words or more: the sentence is the visitor's again.
    run = run_prompt(page, site_url, received, text="Why do rainbows curve?", max_new_tokens=2)
    expect(mask.locator(".run-words-many")).to_be_visible()
    expect(mask.locator(".run-words-many")).to_contain_text('"rainbows" cannot look ahead at "curve"')
    expect(mask.locator(".run-words-one")).to_be_hidden()
    assert not page.errors, page.errors
