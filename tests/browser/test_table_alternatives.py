"""Every diagram that is not a heatmap has a "Show as table" text alternative (issue 13, item 5): each value
the diagram shows, as text, following the step bar like the diagram does."""
import re

from playwright.sync_api import expect
from test_article import collect_frames, run_prompt

HEATMAPS = {"attention", "layers", "mask"}  # a table per heatmap (tests/browser/test_accessibility.py)
DIAGRAMS = ["template", "tokens", "embeddings", "positions", "logits", "stages", "filter", "dice", "sequence", "kv",
            "stream", "stop", "context", "myths", "timeline", "kvcalc", "batch", "speculative", "quant"]


def table_of(page, name: str):
    """Open the "Show as table" right after <he-name>; its table."""
    diagram = page.locator(f"he-{name}")
    diagram.scroll_into_view_if_needed()
    expect(diagram).to_have_attribute("data-rendered", re.compile(r"\d+"))
    # a serving section measures on sight: its table lists the measurement once it is here
    if diagram.locator(".he-status").count():
        expect(diagram.locator(".he-status").first).to_have_attribute("data-state", "done", timeout=240_000)
    box = page.locator(f"he-{name} ~ details.he-table-alt-diagram").first
    if not box.evaluate("box => box.open"):
        box.locator("summary").click()
    return box.locator("table")


def test_every_diagram_that_is_not_a_heatmap_has_a_table_that_follows_the_step(page, site_url):
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=6)
    assert not run["error"], run["error"]
    for name in DIAGRAMS:
        table = table_of(page, name)
        expect(table.locator("caption")).to_contain_text("every value of the diagram, as text")
        rows = table.locator("tr")
        assert rows.count() > 1, name  # a header, then the diagram's values
        assert "Nothing drawn yet." not in table.inner_text(), name
    # The logits table names the candidates of the step on show (a finished run stays on its last step), and
    # moves with the step bar.
    steps = run["step"]
    table = table_of(page, "logits")
    last_top = steps[-1]["logits"]["top"][0]
    expect(table).to_contain_text(f"(id {last_top['id']}): raw logit {last_top['logit']}")
    # The KV table gives every layer's bytes, as the run's frame says.
    kv_table = table_of(page, "kv")
    for i, layer in enumerate(steps[-1]["kv"]["layers"]):
        expect(kv_table).to_contain_text(f"layer {i + 1}: {layer['bytes']:,} bytes")
    page.locator("[data-replay=first]").click()
    page.locator("he-logits").scroll_into_view_if_needed()  # a diagram (and so its table) redraws on screen
    first_top = steps[0]["logits"]["top"][0]  # the prefill's distribution, which step 1 samples from
    expect(table).to_contain_text(f"(id {first_top['id']}): raw logit {first_top['logit']}")
    for name in HEATMAPS:  # their tables are per heatmap, inside the diagram
        page.locator(f"he-{name}").scroll_into_view_if_needed()
        expect(page.locator(f"he-{name} details.he-table-alt").first).to_be_attached()
        assert page.locator(f"he-{name} ~ details.he-table-alt-diagram").count() == 0, name
    assert not page.errors, page.errors
