"""A token count as you type (issue 24, point 5), in Chromium against Daphne: the prompt box says how many tokens
the model will read, how many of them the template adds, and the server's cap; it warns before the cap and says
past it which limit it is (the server's, not the model's context window). The count is the prefill's own length."""
import json
import re

from playwright.sync_api import expect

from tests.browser.test_article import attr
from tests.browser.test_controls import BANNER, FINISHED, open_article

COUNT = "#token-count"
SESSION = re.compile(r"/ws/session/(\?lang=[\w-]+)?$")  # the page asks for its language (?lang=)
LINE = re.compile(r"^(\d+) tokens \((\d+) added by the template\) of the server's 384")


def count_of(page) -> tuple[int, int]:
    """The count of the text in the box now: the line is aria-busy from an edit until its answer is drawn."""
    expect(page.locator(COUNT)).to_have_attribute("aria-busy", "false", timeout=30_000)
    expect(page.locator(COUNT)).to_have_text(LINE)
    tokens, added = LINE.match(page.locator(COUNT).inner_text()).groups()
    return int(tokens), int(added)


def test_the_count_follows_the_typing_and_is_the_prefills_length(page, site_url):
    box = open_article(page, site_url, "Why do moles dig?", max_new_tokens=2)
    expect(page.locator(COUNT)).to_have_text(re.compile(r"^\d+ tokens"), timeout=30_000)
    box.fill("")
    box.type("Why do moles dig tunnels?")  # key by key, as a person types: one count once the typing pauses
    tokens, added = count_of(page)
    assert 0 < added < tokens
    box.press("Enter")
    expect(page.locator(BANNER)).to_have_text(FINISHED, timeout=60_000)
    assert attr(page, "he-tokens", "data-token-count") == str(tokens)  # what the model read
    box.fill("Why do moles dig tunnels under the garden in the spring, and what do they eat down there?")
    assert count_of(page)[0] > tokens
    assert not page.errors, page.errors


def test_it_warns_before_the_cap_and_names_the_limit_past_it(page, site_url):
    box = open_article(page, site_url, "Why do moles dig?")
    tokens, added = count_of(page)
    word = "mole "  # about one token a word on the bundled model
    box.fill(word * (355 - added))
    near = count_of(page)[0]
    assert 0.9 * 384 <= near <= 384, near
    expect(page.locator(COUNT)).to_have_attribute("data-kind", "warn")
    assert f"{384 - near} left before the cap" in page.locator(COUNT).inner_text()
    box.fill(word * 420)
    expect(page.locator(COUNT)).to_have_attribute("aria-busy", "false", timeout=30_000)
    expect(page.locator(COUNT)).to_have_attribute("data-kind", "error")
    text = page.locator(COUNT).inner_text()
    assert "past this server's cap of 384 prompt tokens" in text and "context window is" in text, text
    box.press("Enter")  # the server refuses it the same way
    expect(page.locator(BANNER)).to_contain_text("at most 384 prompt tokens", timeout=30_000)
    expect(page.locator(BANNER)).to_contain_text("added by the chat template")
    assert not page.errors, page.errors


def test_a_count_answered_after_the_next_edit_is_not_shown_for_it(page, site_url):
    """The answer for an older text arrives while the next edit waits for typing to pause: the line stays
    busy (for the text now in the box) and then shows that text's count, never the old one as if current."""
    relay = {"ws": None, "server": None, "answers": [], "hold_answers": False, "requests": [], "hold_requests": False}

    def route(ws):
        server = ws.connect_to_server()
        relay["ws"], relay["server"] = ws, server

        def from_server(message):
            if relay["hold_answers"] and json.loads(message).get("type") == "tokenized":
                relay["answers"].append(message)
                return
            ws.send(message)

        def from_page(message):
            if relay["hold_requests"] and json.loads(message).get("type") == "tokenize":
                relay["requests"].append(message)
                return
            server.send(message)

        server.on_message(from_server)
        ws.on_message(from_page)

    def until(condition) -> None:
        for _ in range(600):
            if condition():
                return
            page.wait_for_timeout(50)
        raise AssertionError("the socket never carried the expected message")

    page.route_web_socket(SESSION, route)
    box = open_article(page, site_url, "Why do moles dig?")
    short, _ = count_of(page)
    relay["hold_answers"] = True
    box.fill("Why do moles dig tunnels under the garden in the spring?")
    until(lambda: relay["answers"])  # the long text's answer, held
    relay["hold_answers"], relay["hold_requests"] = False, True
    box.fill("Why?")  # the next edit: its request waits for the typing pause, and then the test holds it
    relay["ws"].send(relay["answers"].pop())  # the long text's answer arrives during that pause
    until(lambda: relay["requests"])
    expect(page.locator(COUNT)).to_have_attribute("aria-busy", "true")  # still waiting for the count of "Why?"
    relay["hold_requests"] = False
    relay["server"].send(relay["requests"].pop())
    tokens, _ = count_of(page)
    assert tokens < short, (tokens, short)  # the count of "Why?", not of the long text
    assert not page.errors, page.errors
