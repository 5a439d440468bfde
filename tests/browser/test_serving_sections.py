"""The serving sections are never empty (issue 13, item 7): each measures when it first comes on screen, shows
the server's own progress while it measures, and the next visitor gets the kept result at once, dated."""
import json
import re

from playwright.sync_api import expect
from test_article import collect_frames, run_prompt

# Every text the measure status line showed, in order (it changes faster than a poll could see).
RECORD_STATUS = """
window.heStatuses = [];
const heLook = () => {
  for (const host of document.querySelectorAll("he-batch, he-quant")) {
    const root = host.shadowRoot;  // the diagrams draw in their shadow roots: watch each one too
    if (!root) continue;
    if (!root.heWatched) {
      root.heWatched = true;
      new MutationObserver(heLook).observe(root, { subtree: true, childList: true, characterData: true });
    }
    const node = root.querySelector(".he-status");
    const text = node && `${host.localName}: ${node.textContent}`;
    if (text && window.heStatuses[window.heStatuses.length - 1] !== text) window.heStatuses.push(text);
    if (host.localName === "he-batch" && root.querySelector("progress")) window.heSawProgress = true;
  }
};
new MutationObserver(heLook).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
"""


# The diagrams render at most once per animation frame (lib/base-element.js), so two `serving_progress`
# messages that reach a busy page within one frame show only the second's label. The page is then right, but
# the test could not tell a skipped label from a dropped one: each progress message is let through on its own
# frame (the socket's messages wait, in order, two animation frames after one), so every label is drawn once.
ONE_PROGRESS_PER_FRAME = """
(() => {
  const add = WebSocket.prototype.addEventListener;
  WebSocket.prototype.addEventListener = function (type, listener, options) {
    if (type !== "message") return add.call(this, type, listener, options);
    const queue = [];
    let holding = false;
    const pump = () => {
      while (queue.length && !holding) {
        const event = queue.shift();
        listener.call(this, event);
        if (typeof event.data === "string" && event.data.includes('"serving_progress"')) {
          holding = true;
          requestAnimationFrame(() => requestAnimationFrame(() => { holding = false; pump(); }));
        }
      }
    };
    return add.call(this, type, (event) => { queue.push(event); pump(); }, options);
  };
})();
"""


def sent_frames(page) -> list[dict]:
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))))
    return sent


def wait_for(page, frames, test, timeout_s=300) -> dict:
    for _ in range(timeout_s * 4):
        found = [f for f in frames if test(f)]
        if found:
            return found[-1]
        page.wait_for_timeout(250)
    raise AssertionError(f"not received; frames: {[f.get('type') for f in frames]}")


def test_a_section_measures_on_sight_and_shows_what_the_server_measures_now(page, site_url):
    page.add_init_script(RECORD_STATUS)
    page.add_init_script(ONE_PROGRESS_PER_FRAME)
    frames, sent = collect_frames(page), sent_frames(page)
    # The visitor's own prompt (unique here, so measured afresh): the button measures it with progress.
    run_prompt(page, site_url, frames, text="Tell me about batches of 7 cats.", max_new_tokens=4)
    assert not [f for f in sent if f.get("type") == "measure"]  # nothing measured off screen
    page.locator("he-batch").scroll_into_view_if_needed()
    wait_for(page, sent, lambda f: f.get("type") == "measure" and f.get("what") == "batch")
    asked = [(f["what"], f.get("prompt")) for f in sent if f.get("type") == "measure"]
    assert ("batch", "article") in asked and {p for _, p in asked} == {"article"}, asked  # on sight: those on screen
    wait_for(page, frames, lambda f: f.get("type") == "serving" and f.get("what") == "batch")
    button = page.locator("he-batch button.he-measure")
    expect(button).to_be_enabled()
    seen = len(frames)
    button.click()
    answer = wait_for(page, frames, lambda f: f.get("type") == "serving" and f.get("what") == "batch"
                      and f.get("prompt") == "yours")
    progress = [f for f in frames[seen:] if f.get("type") == "serving_progress" and f["what"] == "batch"]
    assert [(f["done"], f["total"]) for f in progress] == [(i, 5) for i in range(5)]
    assert answer["cached"] is False
    shown = page.evaluate("window.heStatuses")
    # The status line said what the server was measuring, part by part, from its own messages.
    for f in progress:
        assert f"he-batch: measuring {f['label']} (part {f['done'] + 1} of 5)…" in shown, shown
    assert page.evaluate("window.heSawProgress") is True  # a <progress> of the server's parts, not a timer
    date = answer["measured_at"][:10]
    expect(page.locator("he-batch .he-status")).to_have_text(re.compile(rf"measured on this server on {date} \d\d:\d\d UTC, on your prompt$"))
    expect(page.locator("he-batch")).to_have_attribute("data-batch-sizes", "1,2,4,8")
    assert not page.errors, page.errors


def test_the_next_visitor_sees_the_kept_measurement_at_once_with_its_date(browser, site_url):
    first = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    frames = collect_frames(first)
    first.goto(site_url + "/")
    first.locator("he-quant").scroll_into_view_if_needed()
    measured = wait_for(first, frames, lambda f: f.get("type") == "serving" and f.get("what") == "quantize")
    assert measured["prompt"] == "article" and measured["measured_at"]
    first.locator("he-quant").scroll_into_view_if_needed()  # the sections above it grew as they measured
    expect(first.locator("he-quant")).to_have_attribute("data-weight-bytes-after", str(measured["data"]["weight_bytes_after"]))
    first.context.close()

    second = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    second.errors = []
    second.on("pageerror", lambda exc: second.errors.append(str(exc)))
    frames = collect_frames(second)
    second.goto(site_url + "/")
    second.locator("he-quant").scroll_into_view_if_needed()
    kept = wait_for(second, frames, lambda f: f.get("type") == "serving" and f.get("what") == "quantize", timeout_s=15)
    assert kept["cached"] is True and (kept["measured_at"], kept["data"]) == (measured["measured_at"], measured["data"])
    assert not [f for f in frames if f.get("type") == "serving_progress" and f["what"] == "quantize"]  # nothing ran again
    second.locator("he-quant").scroll_into_view_if_needed()
    at = f"{measured['measured_at'][:10]} {measured['measured_at'][11:16]} UTC"
    expect(second.locator("he-quant .he-status")).to_have_text(f"measured on this server on {at}, on the article's prompt (kept from then)")
    expect(second.locator("he-quant")).to_have_attribute("data-weight-bytes-after", str(measured["data"]["weight_bytes_after"]))
    assert not second.errors, second.errors
    second.context.close()
