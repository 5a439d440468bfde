"""A recorded run replays in the article with no model running: every diagram draws from the recording."""
import json
import urllib.request
from http.cookiejar import CookieJar

from explainer.services import checks
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.views import done_view, session_view

MESSAGES = [{"role": "user", "content": "What does mole mean?"}]


def record(site_url: str) -> tuple[str, list[dict]]:
    """Run the bundled model here, then POST the payloads like a browser would (CSRF cookie + header)."""
    loaded = load_model("bundled")
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, messages=MESSAGES), SamplingParams(max_new_tokens=8, seed=3))
    payloads = [session_view(session), session.prefill(), checks.causal_mask(session)]
    while not session.finished:
        payloads.append(session.step())
    payloads = json.loads(json.dumps(payloads + [done_view(session)]))
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(site_url + "/")
    token = next(c.value for c in jar if c.name == "csrftoken")
    body = json.dumps({"messages": MESSAGES, "params": {"max_new_tokens": 8, "seed": 3}, "seed": 3,
                       "model_spec": "bundled", "payloads": payloads}).encode()
    request = urllib.request.Request(site_url + "/api/runs", data=body, method="POST", headers={
        "Content-Type": "application/json", "X-CSRFToken": token, "Referer": site_url + "/"})
    with opener.open(request) as response:
        return json.loads(response.read())["url"], payloads


def test_replay_draws_the_recording(page, site_url):
    url, payloads = record(site_url)
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    page.goto(site_url + url)
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    for selector, name, expected in [("he-tokens", "data-token-count", len(prefill["tokens"])),
                                     ("he-kv", "data-kv-bytes", steps[-1]["kv"]["bytes"]),
                                     ("he-dice", "data-u", steps[-1]["draw"]["u"])]:
        element = page.locator(selector)
        element.scroll_into_view_if_needed()
        page.wait_for_function(f"document.querySelector('{selector}').hasAttribute('{name}')", timeout=15_000)
        assert element.get_attribute(name) == str(expected)
    assert sockets == []  # a replay needs no model and opens no socket


def test_save_run_gives_a_permalink_that_replays(page, site_url):
    from tests.browser.test_article import collect_frames, run_prompt

    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=5)
    page.wait_for_function("!document.querySelector('#btn-save').disabled")
    page.locator("#btn-save").click()
    page.wait_for_function("document.querySelector('#permalink').href.includes('/runs/')")
    link = page.locator("#permalink").get_attribute("href")
    page.goto(site_url + link)
    tokens = page.locator("he-tokens")
    tokens.scroll_into_view_if_needed()
    page.wait_for_function("document.querySelector('he-tokens').hasAttribute('data-token-count')", timeout=15_000)
    assert tokens.get_attribute("data-token-count") == str(len(run["prefill"][-1]["tokens"]))
