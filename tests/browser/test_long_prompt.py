"""A prompt long enough that its prefill and its "Full matrix" go out split under the send cap: the page joins
them, draws them, and a saved run of it replays (docs/protocol.md, "Messages larger than the send cap")."""
import re

from playwright.sync_api import expect

from inference.wire.framing import join_message
from tests.browser.test_article import attr, collect_frames, run_prompt
from tests.browser.test_replay import shows

LONG_PROMPT = " ".join(["the water of the river is light and the light of the sky is on the water"] * 16)  # ~290 tokens


def joined(frames: list[dict], kind: str) -> dict:
    """The first `kind` message, joined from its head and parts as the page's client does."""
    start = next(i for i, f in enumerate(frames) if f.get("type") == kind)
    return join_message(frames[start:start + 1 + frames[start].get("parts", 0)])


def test_a_long_prompt_is_joined_drawn_and_replays(page, site_url):
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, text=LONG_PROMPT, max_new_tokens=3)
    assert not run["error"], run["error"]
    assert run["prefill"][0]["parts"] >= 1 and any(f.get("type") == "part" for f in frames)  # it was split
    prefill = joined(frames, "prefill")
    tokens = len(prefill["tokens"])
    assert tokens > 250
    assert attr(page, "he-tokens", "data-token-count") == str(tokens)
    assert attr(page, "he-attention", "data-heads") == str(prefill["attention"]["heads"])
    attention = page.locator("he-attention")
    attention.get_by_role("button", name="Full matrix").click()  # a detail of tokens x tokens: split too
    # ~290 x 290 cells drawn: 13 s alone on the 2-core machine, several times that beside the other xdist worker
    expect(attention).to_contain_text("the full matrix, fetched on request", timeout=120_000)
    detail = joined(frames, "detail")
    assert detail["data"]["shape"] == [tokens, tokens]
    page.locator("#btn-save").click()
    # 2 s alone; the page's main thread is still busy with the matrix, and on a busy CI box the save took past 30 s.
    expect(page.locator("#permalink")).to_have_attribute("href", re.compile("/runs/"), timeout=120_000)
    page.goto(site_url + page.locator("#permalink").get_attribute("href"))
    shows(page, "he-tokens", "data-token-count", tokens)
    shows(page, "he-attention", "data-heads", prefill["attention"]["heads"])
    assert not page.errors, page.errors
