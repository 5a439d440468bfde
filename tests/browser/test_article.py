"""The live article in Chromium: type a prompt, run it, and every diagram shows numbers from this run."""
import json

import pytest
from playwright.sync_api import expect

PROMPT = "What does mole mean?"


class Frames(list):
    """The server messages the page's socket receives, in order; `sent` holds what the page sent."""

    def __init__(self):
        super().__init__()
        self.sent: list[dict] = []


def collect_frames(page) -> Frames:
    """Every server message the page's socket receives (what the diagrams must agree with), and what it sent."""
    frames = Frames()

    def on_socket(ws):
        ws.on("framereceived", lambda payload: frames.append(json.loads(payload)))
        ws.on("framesent", lambda payload: frames.sent.append(json.loads(payload)))

    page.on("websocket", on_socket)
    return frames


def attr(page, selector: str, name: str) -> str:
    """Scroll the diagram on screen (it renders only then) and read its data attribute."""
    element = page.locator(selector)
    element.scroll_into_view_if_needed()
    page.wait_for_selector(f"{selector}[{name}]", state="attached", timeout=30_000)  # no page eval: the CSP forbids it
    return element.get_attribute(name)


def run_prompt(page, site_url, frames, text=PROMPT, max_new_tokens=12):
    page.goto(site_url + "/")
    page.wait_for_selector("#messages textarea")
    page.locator("#messages textarea").first.fill(text)
    page.locator("input[name=max_new_tokens]").fill(str(max_new_tokens))
    page.locator("input[name=temperature]").fill("0.7")
    page.locator("#btn-play").click()
    started(page, frames)
    for _ in range(240):
        if any(f.get("type") == "check" and f.get("name") == "weights_unchanged" for f in frames):
            break
        page.wait_for_timeout(250)
    else:
        pytest.fail(f"the run did not finish; frames: {[f.get('type') for f in frames]}")
    return {kind: [f for f in frames if f.get("type") == kind] for kind in
            ("session", "prefill", "step", "done", "check", "error")}


# What Play was when its click started nothing, and the layout shifts the page had made (when, how far, what moved).
PLAY_THEN = """async () => {
    const b = document.querySelector("#btn-play"), r = b.getBoundingClientRect();
    const at = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    const shifts = await new Promise((resolve) => {
        new PerformanceObserver((list, observer) => { observer.disconnect(); resolve(list.getEntries()); })
            .observe({type: "layout-shift", buffered: true});
        setTimeout(() => resolve([]), 500);
    });
    return {disabled: b.disabled, label: b.textContent, rect: [r.x, r.y, r.width, r.height],
            at: at && (at.id || at.tagName), status: document.querySelector("#status-banner")?.textContent,
            shifts: shifts.map((e) => [Math.round(e.startTime), e.value.toFixed(3),
                                       e.sources.map((s) => s.node?.id || s.node?.nodeName).join(" ")])};
}"""


def started(page, frames: Frames) -> None:
    """Wait until the click on Play has started a run; a failure says what the page sent and what Play was."""
    for _ in range(120):  # a session's first frame, or the server's answer why not
        if any(f.get("type") in ("session", "error", "busy") for f in frames):
            return
        page.wait_for_timeout(250)
    seen = page.evaluate(PLAY_THEN)
    pytest.fail(f"Play's click started nothing: {seen}; sent {[f.get('type') for f in frames.sent]}; "
                f"received {[f.get('type') for f in frames]}; page errors {getattr(page, 'errors', None)}")


def test_every_section_draws_this_run(page, site_url):
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames)
    assert not run["error"], run["error"]
    prefill, steps, done = run["prefill"][-1], run["step"], run["done"][-1]
    last = steps[-1]
    # A finished run stays on its last step (issue 23), where the learner was watching it; "first" goes back.
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(len(steps)))
    page.locator("[data-replay=first]").click()
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", "0")
    page.locator("[data-replay=last]").click()
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(len(steps)))
    assert PROMPT in prefill["template"]["text"]
    assert attr(page, "he-template", "data-text-length") == str(len(prefill["template"]["text"]))
    assert attr(page, "he-tokens", "data-token-count") == str(len(prefill["tokens"]))
    assert attr(page, "he-embeddings", "data-rows") == str(len(prefill["tokens"]))
    assert attr(page, "he-embeddings", "data-table-shape") == "x".join(map(str, prefill["embeddings"]["shape"]))
    assert attr(page, "he-positions", "data-scheme") == prefill["positions"]["scheme"] == "rotary"
    assert attr(page, "he-mask", "data-size") == str(prefill["mask"]["size"])
    assert attr(page, "he-mask", "data-check-passed") == "true"
    assert attr(page, "he-attention", "data-layers") == str(prefill["attention"]["layers"])
    assert attr(page, "he-attention", "data-keys") == str(last["attention"]["keys"])
    assert attr(page, "he-layers", "data-depth") == str(prefill["attention"]["layers"] + 1)
    assert attr(page, "he-logits", "data-top-id") == str(last["logits"]["top"][0]["id"])
    assert attr(page, "he-stages", "data-stage-count") == str(len(last["stages"])) == "7"
    assert attr(page, "he-filter", "data-survivors") == str(last["stages"][-1]["survivors"])
    assert attr(page, "he-dice", "data-u") == str(last["draw"]["u"])
    assert attr(page, "he-sequence", "data-length") == str(len(prefill["tokens"]) + len(steps))
    assert attr(page, "he-kv", "data-kv-bytes") == str(last["kv"]["bytes"])
    assert attr(page, "he-stream", "data-text-length") == str(len("".join(s["text_delta"] for s in steps)))
    assert attr(page, "he-stop", "data-stop-reason") == done["stop_reason"]
    assert attr(page, "he-context", "data-context-window") == str(run["session"][-1]["model"]["context_window"])
    assert attr(page, "he-myths", "data-failed") == "0"
    assert attr(page, "he-myths", "data-waiting") == "0"
    assert page.locator("#reply").inner_text().strip() == done["text"].strip()
    assert not page.errors, page.errors


def test_model_text_stays_text(page, site_url):
    """A prompt full of markup: the template diagram shows it as text and no script runs."""
    frames = collect_frames(page)
    page.add_init_script("window.__xss = 0")
    evil = "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>"
    run = run_prompt(page, site_url, frames, text=evil, max_new_tokens=3)
    assert not run["error"]
    template = page.locator("he-template")
    template.scroll_into_view_if_needed()
    expect(page.locator("he-template")).to_contain_text("onerror", timeout=15_000)
    assert page.evaluate("window.__xss") == 0
    assert page.locator("he-template img, he-tokens img, #reply img, he-template script").count() == 0


def test_phone_width_has_no_horizontal_scroll(browser, site_url):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(site_url + "/")
    width = page.evaluate("document.documentElement.scrollWidth")
    context.close()
    assert width <= 400


def test_the_run_controls_stay_put_once_play_is_enabled(page, site_url):
    """What comes after the socket opens (the workshop banner, the prompt's token count, the example picker) is drawn
    in space kept for it: the run bar does not move under a pointer about to press Compare, Step or Play."""
    page.add_init_script("""
        window.__runBarY = [];
        const watch = () => {
            const button = document.querySelector("#btn-compare");
            if (button && !document.querySelector("#btn-play")?.disabled) window.__runBarY.push(button.getBoundingClientRect().y);
            requestAnimationFrame(watch);
        };
        requestAnimationFrame(watch);
    """)
    page.goto(site_url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)
    expect(page.locator("#workshop-banner button")).to_be_enabled()  # the socket's first message, drawn by the script
    expect(page.locator("#example-bar")).to_have_attribute("data-example", "biopsy")  # the first paint's example
    expect(page.locator("#token-count")).to_have_attribute("aria-busy", "false")
    expect(page.locator("#token-count")).to_contain_text("tokens")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    ys = page.evaluate("window.__runBarY")
    assert ys and max(ys) - min(ys) <= 1, f"the run bar moved by {max(ys) - min(ys):.1f} px after Play was enabled: {sorted(set(round(y) for y in ys))}"
