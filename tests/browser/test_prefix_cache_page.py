"""What a learner sees of the prefix cache (issue 24 points 3 and 4): a second prompt that starts like an earlier
one says, in the timeline, how many of its tokens came from the cache and what the server's cache holds."""
from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt

FIRST = "What does a mole on the skin look like?"
SECOND = "What does a mole on the skin feel like?"


def test_the_timeline_says_which_tokens_came_from_the_prefix_cache(page, site_url):
    frames = collect_frames(page)
    run_prompt(page, site_url, frames, text=FIRST, max_new_tokens=4)
    frames.clear()
    run = run_prompt(page, site_url, frames, text=SECOND, max_new_tokens=4)
    prefill = run["prefill"][-1]
    cached, total = prefill["cached_tokens"], len(prefill["tokens"])
    assert 0 < cached < total  # the template's start and the shared words, at least
    timeline = page.locator("he-timeline")
    timeline.scroll_into_view_if_needed()
    expect(timeline).to_have_attribute("data-cached-tokens", str(cached))
    expect(timeline.locator(".he-prefix-said")).to_contain_text(
        f"The first {cached} tokens of the {total} the model reads were computed once, by an earlier prefill on this server: "
        f"this prefill ran {total - cached} tokens instead of {total}.")
    tile = timeline.locator(".he-stats div", has_text="from the prefix cache")
    expect(tile.locator("dd")).to_have_text(f"{cached} of {total}")
    stats = prefill["prefix_cache"]
    hits = timeline.locator(".he-stats div", has_text="hit rate")
    expect(hits.locator("dd")).to_have_text(f"{int(stats['hits'] / stats['lookups'] * 100 + 0.5)}%")  # toFixed: half up
    expect(timeline.locator(".he-stats div", has_text="tokens saved").locator("dd")).to_have_text(f"{stats['tokens_saved']:,}")
    # The mask section's live check ran from the same cached prefix (two passes of the rest), and says so.
    check = next(f for f in frames if f.get("type") == "check" and f.get("name") == "causal_mask")
    data = check["data"]
    assert data["from_prefix_cache"] == cached < data["change_at"] and check["passed"], data
    mask = page.locator("he-mask")
    mask.scroll_into_view_if_needed()
    expect(mask).to_contain_text(f"Both passes began from the prefix cache's keys and values for the first {cached} positions, "
                                 f"as this run's own prefill did, so those positions are the same numbers in both; "
                                 f"positions {cached} to {total - 1} were computed in each pass.")
    expect(mask).to_contain_text("Passed: nothing before the change moved.")
