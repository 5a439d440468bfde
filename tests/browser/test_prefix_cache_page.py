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
