"""The wait after Enter, shown and stoppable (issue 24, point 1), in Chromium against Daphne with the Makefile's
flags. The page's socket is routed through the test (Playwright's route_web_socket), so what the page has been
told at each moment is the test's choice and nothing races the model: the start is held until Stop is pressed
(the server then reads start and stop back to back, as from a visitor who presses Stop at once), or the
server's frames are held from the `prefill` on while the test reads the page."""
import json
import re

from playwright.sync_api import expect

from tests.browser.test_controls import BANNER, FINISHED, open_article

# About 190 tokens on the bundled model with its template: past one prefill chunk (64), so it goes in chunks.
LONG = "A mole is a small animal that digs tunnels under the garden and eats worms. " * 8
SESSION = re.compile(r"/ws/session/(\?lang=[\w-]+)?$")  # the page asks for its language (?lang=)


def test_the_status_says_prefill_from_enter_and_stop_ends_it_with_no_step(page, site_url):
    held = {"start": None, "sent": []}

    def route(ws):
        server = ws.connect_to_server()

        def from_page(message):
            kind = json.loads(message).get("type")
            held["sent"].append(kind)
            if kind == "start" and held["start"] is None:
                held["start"] = message  # the server hears nothing of this run until Stop is pressed
                return
            if kind == "stop" and held["start"]:
                server.send(held["start"])
            server.send(message)

        ws.on_message(from_page)

    page.route_web_socket(SESSION, route)
    box = open_article(page, site_url, LONG, max_new_tokens=16)
    box.press("Enter")
    # Nothing has come back yet: the page says what the server is doing from the moment Enter is pressed.
    expect(page.locator(BANNER)).to_have_text("Reading your prompt (prefill)…")
    expect(page.locator("#btn-stop")).to_be_enabled()
    expect(page.locator("#btn-pause")).to_be_enabled()
    expect(page.locator("#btn-play")).to_have_text("Restart")
    expect(page.locator("#btn-step")).to_be_disabled()
    page.locator("#btn-stop").click()
    expect(page.locator(BANNER)).to_have_text(FINISHED, timeout=60_000)
    reason, steps = FINISHED.search(page.locator(BANNER).inner_text()).groups()
    assert (reason, steps) == ("stopped", "0"), page.locator(BANNER).inner_text()
    assert held["sent"].count("start") == 1 and "stop" in held["sent"]
    expect(page.locator("#reply")).to_have_text("")
    expect(page.locator("#btn-play")).to_have_text("Play")
    assert not page.errors, page.errors


def test_the_prefill_shows_the_servers_progress_and_the_map_says_prefilling(page, site_url):
    relay = {"ws": None, "held": [], "release": False}

    def route(ws):
        server = ws.connect_to_server()
        relay["ws"] = ws

        def from_server(message):
            kind = json.loads(message).get("type")
            if not relay["release"] and (relay["held"] or kind == "prefill"):
                relay["held"].append(message)  # the page is left where the prefill is still under way
                return
            ws.send(message)

        server.on_message(from_server)

    page.route_web_socket(SESSION, route)
    box = open_article(page, site_url, LONG, max_new_tokens=4)
    box.press("Enter")
    banner = page.locator(BANNER)
    expect(banner).to_have_text(re.compile(r"^Reading your prompt \(prefill\)… \d+ of \d+ tokens$"), timeout=30_000)
    done, total = map(int, re.search(r"(\d+) of (\d+)", banner.inner_text()).groups())
    assert 0 < done < total, (done, total)  # the last chunk is in the prefill itself
    for stage in ("tokens", "embeddings", "logits"):
        expect(page.locator(f"he-pipeline .he-stage[data-stage={stage}] .he-fig")).to_have_text("prefilling")
    expect(page.locator("#btn-stop")).to_be_enabled()
    expect(page.locator("#btn-pause")).to_be_enabled()
    relay["release"] = True
    for message in relay["held"]:
        relay["ws"].send(message)
    relay["held"].clear()
    expect(banner).to_have_text(FINISHED, timeout=60_000)
    expect(page.locator("he-pipeline .he-stage[data-stage=tokens] .he-fig")).to_have_text(f"{total} tokens")
    assert not page.errors, page.errors


def test_on_a_phone_enter_brings_the_status_and_the_reply_into_view(browser, site_url):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        box = open_article(page, site_url, "Why do moles dig?", max_new_tokens=8)
        expect(page.locator(BANNER)).not_to_be_in_viewport()  # the prompt box and the parameters fill the screen
        box.press("Enter")
        expect(page.locator(BANNER)).to_be_in_viewport()
        expect(page.locator("#reply-box")).to_be_in_viewport()
        expect(page.locator(BANNER)).to_have_text(FINISHED, timeout=60_000)
    finally:
        context.close()


def test_after_the_last_step_the_status_says_the_reply_is_complete_until_done(page, site_url):
    """The last step comes with its stop reason; `done` follows once the run's causal-mask check is out, which in a
    class waits for everyone's tokens. Meanwhile the status says the reply is complete, not "Generating…". The
    server's frames after the last step are held here while the test reads the page, so nothing races the model."""
    relay = {"ws": None, "held": [], "last": None, "release": False}

    def route(ws):
        server = ws.connect_to_server()
        relay["ws"] = ws

        def from_server(message):
            if relay["last"] is not None and not relay["release"]:
                relay["held"].append(message)  # check, done, the closing checks and status: after the reading
                return
            ws.send(message)
            data = json.loads(message)
            if data.get("type") == "step" and data.get("stop_reason"):
                relay["last"] = data

        server.on_message(from_server)

    page.route_web_socket(SESSION, route)
    box = open_article(page, site_url, "Why do moles dig?", max_new_tokens=4)
    box.press("Enter")
    banner = page.locator(BANNER)
    expect(banner).to_have_text(re.compile(r"^The reply is complete \(.+\) after \d+ steps?; the server is finishing the run's checks…$"),
                                timeout=60_000)
    expect(page.locator("#btn-stop")).to_be_disabled()  # nothing left to stop or pause: the server would refuse
    expect(page.locator("#btn-pause")).to_be_disabled()
    last = relay["last"]
    assert banner.inner_text() == (f"The reply is complete ({last['stop_reason']}) after {last['step']} "
                                   f"step{'s' if last['step'] != 1 else ''}; the server is finishing the run's checks…")
    relay["release"] = True
    for message in relay["held"]:
        relay["ws"].send(message)
    relay["held"].clear()
    expect(banner).to_have_text(FINISHED, timeout=60_000)
    assert FINISHED.search(banner.inner_text()).groups() == (last["stop_reason"], str(last["step"]))
    assert not page.errors, page.errors
