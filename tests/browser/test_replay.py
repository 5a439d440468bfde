"""A recorded run replays in the article with no model running: every diagram draws from the recording."""
import json
import re
import urllib.request
from http.cookiejar import CookieJar
from urllib.parse import urlparse

from playwright.sync_api import expect

from explainer.management.commands import record_examples

MESSAGES = [{"role": "user", "content": "What does mole mean?"}]


def record(site_url: str) -> tuple[str, list[dict]]:
    """Run the bundled model here as a live run would, then POST the payloads like a browser (CSRF cookie + header)."""
    recording = record_examples.record(record_examples.load_bundled(), MESSAGES, {"max_new_tokens": 8, "seed": 3})
    return save(site_url, recording["payloads"]), recording["payloads"]


def save(site_url: str, payloads: list[dict], recording: dict | None = None) -> str:
    """POST these payloads as the bundled model's run of MESSAGES (or as `recording` says); the recording's page URL."""
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(site_url + "/")
    token = next(c.value for c in jar if c.name == "csrftoken")
    given = {"messages": MESSAGES, "params": {"max_new_tokens": 8, "seed": 3}, "seed": 3, "model_spec": "bundled"}
    body = json.dumps({**given, **(recording or {}), "payloads": payloads}).encode()
    request = urllib.request.Request(site_url + "/api/runs", data=body, method="POST", headers={
        "Content-Type": "application/json", "X-CSRFToken": token, "Referer": site_url + "/"})
    with opener.open(request) as response:
        return json.loads(response.read())["url"]


def shows(page, selector: str, name: str, expected) -> None:
    """Scroll the diagram on screen (it renders only then) and wait until its attribute reads `expected`."""
    page.locator(selector).scroll_into_view_if_needed()
    expect(page.locator(selector)).to_have_attribute(name, str(expected), timeout=30_000)


def test_replay_draws_the_recording(page, site_url):
    url, payloads = record(site_url)
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    page.goto(site_url + url)
    expect(page.locator(".recording-origin")).to_contain_text("posted through the API, not verified")
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    for selector, name, expected in [("he-tokens", "data-token-count", len(prefill["tokens"])),
                                     ("he-kv", "data-kv-bytes", steps[0]["kv"]["bytes"]),
                                     ("he-dice", "data-u", steps[0]["draw"]["u"])]:
        shows(page, selector, name, expected)
    # A measurement has no server to ask here: every measure control says it needs the live server and
    # links to its own section on the live article; nothing is measured on sight.
    for selector, section in [("he-timeline", "timeline"), ("he-kvcalc", "kvcalc"), ("he-batch", "batching"),
                              ("he-speculative", "speculative"), ("he-quant", "quantization")]:
        diagram = page.locator(selector)
        diagram.scroll_into_view_if_needed()
        expect(diagram.locator("button.he-measure").first).to_be_disabled()
        expect(diagram.locator(".he-needs-server").first).to_contain_text("Measuring needs the live server")
        expect(diagram.locator("a.he-live-link").first).to_have_attribute("href", f"/#{section}")
        expect(diagram.locator(".he-status").first).to_have_attribute("data-state", "idle")
    assert sockets == []  # the replay opened none
    with page.expect_websocket(timeout=30_000) as opened:  # waits for the live article's socket, however slow
        page.locator("he-batch a.he-live-link").click()
    page.wait_for_url(site_url + "/#batching")
    expect(page.locator("#run-form")).to_be_visible()  # the live article, with the prompt box
    assert urlparse(opened.value.url).path == "/ws/session/"  # (?lang=en: the server's own sentences in English)


def test_save_run_gives_a_permalink_that_replays(page, site_url):
    from tests.browser.test_article import collect_frames, run_prompt

    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=5)
    expect(page.locator("#btn-save")).to_be_enabled()
    page.locator("#btn-save").click()
    expect(page.locator("#permalink")).to_have_attribute("href", re.compile("/runs/"))
    link = page.locator("#permalink").get_attribute("href")
    page.goto(site_url + link)
    shows(page, "he-tokens", "data-token-count", len(run["prefill"][-1]["tokens"]))
    # The payloads the browser posted are the ones this server sent: signed, and the replay says so.
    expect(page.locator(".recording-origin")).to_have_attribute("data-verified", "true")
    expect(page.locator(".recording-origin")).to_contain_text("recorded on this server")


def at_step(page, k: int, n: int) -> None:
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(k))
    expect(page.locator("#replay-readout")).to_have_text(f"step {k} of {n}")


def test_step_through_a_recording(page, site_url):
    """⏮ ◀ ▶| ⏭, the slider and the arrow keys move every diagram to step k's numbers, and back."""
    url, payloads = record(site_url)
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    done = next(p for p in payloads if p["type"] == "done")
    n, prompt_len = len(steps), len(prefill["tokens"])
    assert n >= 3 and len({s["logits"]["top"][0]["id"] for s in steps}) > 1  # steps that can be told apart
    page.goto(site_url + url)
    bar = page.locator("#replay-bar")
    bar.wait_for(state="visible")
    at_step(page, 1, n)  # a permalink opens the finished run on its first generated token
    shows(page, "he-myths", "data-waiting", 0)  # whole-run diagrams show the whole recording

    def expect_step(k):
        at_step(page, k, n)
        top = steps[k - 1]["logits"]["top"][0]["id"] if k else prefill["logits"]["top"][0]["id"]
        shows(page, "he-logits", "data-top-id", top)
        shows(page, "he-sequence", "data-length", prompt_len + k)
        shows(page, "he-tokens", "data-token-count", prompt_len)
        assert page.locator("#reply").inner_text().strip() == done["text"].strip()  # the reply is the whole run's

    page.locator("[data-replay=first]").click()
    expect_step(0)
    for k in (1, 2):
        page.locator("[data-replay=next]").click()
        expect_step(k)
    page.locator("[data-replay=prev]").click()
    expect_step(1)
    bar.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect_step(3)
    page.keyboard.press("ArrowLeft")
    expect_step(2)
    page.locator("#replay-range").fill(str(n - 1))
    expect_step(n - 1)
    page.locator("[data-replay=last]").click()
    expect_step(n)
    shows(page, "he-stop", "data-stop-reason", done["stop_reason"])
    shows(page, "he-myths", "data-waiting", 0)
    page.locator("[data-replay=first]").click()
    page.locator("[data-replay=play]").click()  # one step at a time up to the end, then it stops
    at_step(page, n, n)
    assert page.locator("[data-replay=play]").get_attribute("aria-pressed") == "false"
    assert not page.errors, page.errors
