"""Embeds in Chromium, on an author's page served from another origin: iframes and the script-tag custom elements."""
import functools
import http.server
import json
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ROOT
from tests.browser.test_replay import record

LIVE_PROMPT = "Why is the sky blue?"
SIZE_LISTENER = """<script>
  window.heSizes = [];
  addEventListener("message", (e) => { if (e.data && e.data.type === "he-embed-size") heSizes.push({ height: e.data.height, origin: e.origin }); });
</script>"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def recording(site_url):
    """One recorded run on the site: (its id, the payloads it was saved from)."""
    url, payloads = record(site_url)
    return url.rsplit("/", 1)[1], payloads


@pytest.fixture
def author_page(tmp_path):
    """A plain static server on another loopback port, i.e. a different origin: publish(name, html) -> its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def publish(name: str, html: str) -> str:
        (tmp_path / name).write_text(html, encoding="utf-8")
        return f"http://127.0.0.1:{server.server_port}/{name}"

    yield publish
    server.shutdown()
    server.server_close()


def html(site_url: str, body: str, head: str = "") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>An author\'s page</title>{head}'
            f'<script type="module" src="{site_url}/static/js/embed.js"></script></head>'
            f"<body><h1>My article</h1><p>Some prose of the author's.</p>{body}</body></html>")


@pytest.fixture(autouse=True)
def console_errors(page):
    """Console errors (a CORS or CSP refusal shows up here, not as a page error) fail the test."""
    errors = []

    def keep(message):
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            errors.append(f"{message.text} ({message.location.get('url')})")

    page.on("console", keep)
    yield errors
    assert not errors, errors


def sockets_of(page) -> list:
    opened = []
    page.on("websocket", lambda ws: opened.append(ws))
    return opened


def record_frames(page) -> list[dict]:
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(json.loads(payload))))
    return frames


def chip_ids(scope, selector: str) -> list[str]:
    return scope.locator(f"{selector} .he-chip .he-id").all_inner_texts()


def test_iframe_embed_replays_the_recording(page, site_url, recording, author_page):
    run_id, payloads = recording
    prefill = next(p for p in payloads if p["type"] == "prefill")
    sockets = sockets_of(page)
    page.goto(author_page("iframe.html", html(site_url, f'<iframe data-he-embed src="{site_url}/embed/tokens/?run={run_id}"></iframe>')))
    frame = page.frame_locator("iframe[data-he-embed]")
    frame.locator("he-tokens[data-token-count]").wait_for(timeout=20_000)
    assert frame.locator("he-tokens").get_attribute("data-token-count") == str(len(prefill["tokens"]))
    assert chip_ids(frame, "he-tokens") == [str(t["id"]) for t in prefill["tokens"]]
    assert frame.locator(".he-embed-caption").get_attribute("data-state") == "replay"
    link = frame.get_by_role("link", name="Hit Enter — full article")
    assert link.get_attribute("href") == f"/runs/{run_id}#tokens"
    assert sockets == []  # a replay runs no model
    assert not page.errors, page.errors


def test_iframe_posts_its_height_and_the_script_sizes_it(page, site_url, recording, author_page):
    run_id, _ = recording
    body = f'<iframe data-he-embed src="{site_url}/embed/stop/?run={run_id}" style="height: 40px; border: 0"></iframe>'
    page.goto(author_page("sized.html", html(site_url, body, head=SIZE_LISTENER)))
    page.frame_locator("iframe").locator("he-stop[data-rendered]").wait_for(timeout=20_000)
    # Settled: the last posted height is the iframe's height (embed.js applied it) and the page's real height.
    page.wait_for_function("""() => heSizes.length > 0 &&
        document.querySelector('iframe').clientHeight === heSizes[heSizes.length - 1].height""", timeout=15_000)
    posted = page.evaluate("heSizes[heSizes.length - 1]")
    inner = next(f for f in page.frames if f.url.startswith(site_url + "/embed/"))
    assert posted["origin"] == site_url
    assert posted["height"] == inner.evaluate("Math.ceil(document.body.getBoundingClientRect().height)")
    assert posted["height"] > 100  # more than the 40px the author gave it: the diagram and its header
    assert not page.errors, page.errors


def test_script_tag_on_another_origin_replays_and_runs_live(page, site_url, recording, author_page):
    run_id, payloads = recording
    prefill = next(p for p in payloads if p["type"] == "prefill")
    live = f'prompt="{LIVE_PROMPT}" max_new_tokens="4" temperature="0.8" seed="5"'
    body = (f'<he-tokens run="{run_id}"></he-tokens><he-attention run="{run_id}"></he-attention>'
            f'<he-tokens {live} autostart></he-tokens><he-stages {live}></he-stages>')
    sockets = sockets_of(page)
    frames = record_frames(page)
    page.goto(author_page("script.html", html(site_url, body)))

    # The recording: the same numbers as its payloads, a caption linking to the article's replay.
    page.wait_for_selector("he-tokens[run][data-token-count]", timeout=20_000)
    assert chip_ids(page, "he-tokens[run]") == [str(t["id"]) for t in prefill["tokens"]]
    page.locator("he-attention[run]").scroll_into_view_if_needed()
    page.wait_for_selector("he-attention[run][data-layers]", timeout=20_000)
    assert page.get_attribute("he-attention[run]", "data-layers") == str(prefill["attention"]["layers"])
    link = page.locator("he-tokens[run] .he-embed-caption a")
    assert link.get_attribute("href") == f"{site_url}/runs/{run_id}#tokens"

    # The live pair shares one session (one socket, one prompt box) and reaches a finished run.
    page.wait_for_selector("he-tokens[prompt] .he-embed-caption[data-state=finished]", timeout=90_000)
    # its own session, asking for the server's sentences in the element's language (the author's page: en)
    assert len(sockets) == 1 and sockets[0].url == site_url.replace("http", "ws") + "/ws/embed/?lang=en"
    assert page.locator(".he-embed-form").count() == 1
    live_prefill = next(f for f in frames if f["type"] == "prefill")
    assert LIVE_PROMPT in live_prefill["template"]["text"]
    page.locator("he-tokens[prompt]").scroll_into_view_if_needed()  # a diagram draws once it is on screen
    page.wait_for_selector("he-tokens[prompt][data-token-count]", timeout=20_000)
    assert chip_ids(page, "he-tokens[prompt]") == [str(t["id"]) for t in live_prefill["tokens"]]
    assert page.locator("he-stages[prompt] .he-embed-caption").get_attribute("data-state") == "finished"

    # The diagrams' own stylesheet reaches their shadow roots and nothing else: the author's body keeps the browser's defaults.
    page.wait_for_function("() => getComputedStyle(document.querySelector('he-tokens').shadowRoot.querySelector('.he-chips')).display === 'flex'", timeout=10_000)
    assert page.evaluate("getComputedStyle(document.body).fontSize") == "16px"
    assert page.evaluate("getComputedStyle(document.body).margin") == "8px"
    assert not page.errors, page.errors


def test_live_embed_sends_element_requests_and_replay_ignores_them(page, site_url, recording, author_page):
    run_id, _ = recording
    body = (f'<he-stages run="{run_id}"></he-stages>'
            f'<he-stages prompt="{LIVE_PROMPT}" max_new_tokens="3" temperature="0.8" autostart></he-stages>')
    sockets = sockets_of(page)
    frames = record_frames(page)
    page.goto(author_page("requests.html", html(site_url, body)))
    page.wait_for_selector("he-stages[prompt] .he-embed-caption[data-state=finished]", timeout=90_000)
    page.wait_for_selector("he-stages[run][data-stage-count]", timeout=20_000)
    for selector in ("he-stages[run]", "he-stages[prompt]"):  # the temperature slider asks for a `retemper`
        page.locator(selector).scroll_into_view_if_needed()
        page.wait_for_selector(f"{selector}[data-stage-count]", timeout=20_000)
        page.eval_on_selector(f"{selector} input[type=range][aria-label=temperature]", "s => { s.value = '0.5'; s.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => Object.keys(document.querySelector('he-stages[prompt]').data.retempers).length > 0", timeout=20_000)
    answer = next(f for f in frames if f["type"] == "retemper")
    assert page.evaluate(f"document.querySelector('he-stages[prompt]').data.retempers[{answer['step']}].step") == answer["step"]
    assert page.evaluate("Object.keys(document.querySelector('he-stages[run]').data.retempers).length") == 0
    assert len(sockets) == 1
    assert not page.errors, page.errors


def test_the_shipped_demo_file_works_from_another_origin(page, site_url, author_page):
    """docs/embed-demo.html, pointed at this test's server: every section is drawn and captioned, the live run finishes."""
    demo = (ROOT / "docs" / "embed-demo.html").read_text(encoding="utf-8").replace("http://127.0.0.1:8000", site_url)
    page.goto(author_page("embed-demo.html", demo))
    page.wait_for_selector("he-tokens .he-embed-caption[data-state=finished]", timeout=90_000)
    sections = page.evaluate("""() => [...document.querySelectorAll('*')].filter((n) => n.localName.startsWith('he-'))
        .map((n) => [n.localName, Boolean(customElements.get(n.localName)),
                     n.shadowRoot?.querySelector('.he-controls-below > :last-child')?.className])""")
    assert len({name for name, _, _ in sections}) == 22
    assert all(defined and caption == "he-embed-caption" for _, defined, caption in sections), sections
    assert not page.errors, page.errors


def test_demo_page_embeds_every_section_from_the_shipped_example(page, site_url):
    index = json.loads((ROOT / "static/examples/index.json").read_text())
    example = json.loads((ROOT / "static/examples" / index[0]["file"]).read_text())
    prefill = next(p for p in example["payloads"] if p["type"] == "prefill")
    page.goto(site_url + "/embed/")
    page.wait_for_selector("he-quant .he-embed-caption[data-state=replay]", timeout=30_000)
    captions = page.evaluate("""() => [...document.querySelectorAll('*')].filter((n) => n.localName.startsWith('he-')
        && n.shadowRoot?.querySelector('.he-embed-caption')).map((n) => n.localName)""")
    assert len(captions) == 22 and len(set(captions)) == 22
    page.locator("he-tokens").scroll_into_view_if_needed()
    page.wait_for_selector("he-tokens[data-token-count]", timeout=20_000)
    assert chip_ids(page, "he-tokens") == [str(t["id"]) for t in prefill["tokens"]]
    frame = page.frame_locator("#embed-template iframe")
    frame.locator("he-template[data-rendered]").wait_for(timeout=20_000)
    assert frame.locator(".he-embed-caption").get_attribute("data-state") == "replay"
    assert not page.errors, page.errors


def test_the_documented_csp_is_enough(page, site_url, recording, author_page):
    """An author's page with the strict policy docs/embedding.md gives: everything loads and runs, nothing is refused."""
    run_id, _ = recording
    host = site_url.split("//", 1)[1]
    policy = (f"default-src 'self'; script-src 'self' {site_url}; style-src 'self' {site_url}; "
              f"connect-src 'self' {site_url} ws://{host}; frame-src {site_url}")
    head = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
    body = (f'<he-tokens run="{run_id}"></he-tokens><he-dice prompt="{LIVE_PROMPT}" max_new_tokens="3" autostart></he-dice>'
            f'<iframe data-he-embed src="{site_url}/embed/tokens/?run={run_id}"></iframe>')
    violations = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None)
    page.goto(author_page("csp.html", html(site_url, body, head=head)))
    page.wait_for_selector("he-dice .he-embed-caption[data-state=finished]", timeout=90_000)
    page.wait_for_selector("he-tokens[data-token-count]", timeout=20_000)
    page.wait_for_function("() => getComputedStyle(document.querySelector('he-tokens').shadowRoot.querySelector('.he-chips')).display === 'flex'", timeout=10_000)
    page.locator("iframe").scroll_into_view_if_needed()
    page.frame_locator("iframe").locator("he-tokens[data-token-count]").wait_for(timeout=20_000)
    page.wait_for_function("() => document.querySelector('iframe').clientHeight > 150", timeout=15_000)  # sized by embed.js
    assert violations == []
    assert not page.errors, page.errors


def test_an_embedded_recording_says_measuring_needs_the_live_server(page, site_url, recording, author_page):
    """A serving diagram on a recording has no server to measure on: on sight it links to the live article."""
    run_id, _ = recording
    sockets = sockets_of(page)
    page.goto(author_page("serving.html", html(site_url, f'<he-batch run="{run_id}"></he-batch>')))
    batch = page.locator("he-batch")
    batch.scroll_into_view_if_needed()
    expect(batch.locator(".he-needs-server")).to_contain_text("Measuring needs the live server", timeout=20_000)
    expect(batch.locator("a.he-live-link")).to_have_attribute("href", f"{site_url}/")
    expect(batch.locator("button.he-measure")).to_be_disabled()
    assert batch.locator(".he-error").count() == 0  # not a refusal: a recording simply has no server
    assert sockets == []
    assert not page.errors, page.errors


def test_a_replay_offers_no_fork_and_a_live_embed_does(page, site_url, recording, author_page):
    """"Continue from step N with …" needs a live run: a recording replayed (element or iframe) shows no fork row."""
    run_id, _ = recording
    forked = ("logits", "filter", "dice")  # the diagrams with a fork row
    body = "".join(f'<he-{s} run="{run_id}" step="2"></he-{s}>' for s in forked)
    body += f'<he-dice prompt="{LIVE_PROMPT}" max_new_tokens="3" autostart id="live"></he-dice>'
    body += f'<iframe data-he-embed src="{site_url}/embed/dice/?run={run_id}&step=2"></iframe>'
    page.goto(author_page("forks.html", html(site_url, body)))
    for s in forked:
        page.wait_for_selector(f"he-{s}[run][data-rendered]", state="attached", timeout=20_000)
        assert page.locator(f"he-{s}[run] .he-forks, he-{s}[run] button.he-fork").count() == 0, s
        assert "Continue from step" not in page.locator(f"he-{s}[run]").evaluate("e => e.shadowRoot.textContent"), s
    frame = page.frame_locator("iframe")
    frame.locator("he-dice[data-rendered]").wait_for(state="attached", timeout=20_000)
    assert frame.locator(".he-forks, button.he-fork").count() == 0
    # The live one, finished, offers the row: one button per other candidate, each asking for a fork.
    page.wait_for_selector("#live .he-embed-caption[data-state=finished]", timeout=90_000)
    page.locator("#live").scroll_into_view_if_needed()
    expect(page.locator("#live .he-forks")).to_have_count(1)
    assert page.locator("#live button.he-fork").count() > 0
    assert not page.errors, page.errors
