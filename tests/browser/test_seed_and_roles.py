"""Issue 23 on the page: a blank seed box runs on a fresh seed the page then shows; the template diagram and
the map count the messages typed, not the template's spans."""
from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt


def test_a_blank_seed_runs_on_a_fresh_one_the_page_shows(page, site_url):
    frames = collect_frames(page)
    run_prompt(page, site_url, frames, max_new_tokens=3)
    expect(page.locator("input[name=seed]")).to_have_value("")
    seed = next(f for f in frames if f.get("type") == "session")["params"]["seed"]
    expect(page.locator("#run-seed")).to_have_text(f"this run: seed {seed}")
    expect(page.locator("#reply-seed")).to_contain_text(f"seed {seed}")
    template = page.locator("he-template")
    template.scroll_into_view_if_needed()
    expect(template).to_have_attribute("data-messages", "1", timeout=15_000)
    expect(page.locator("he-pipeline")).to_contain_text("1 message")
    assert not page.errors, page.errors
