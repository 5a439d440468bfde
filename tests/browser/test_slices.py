"""Embeds download the slice of a recording their section draws (issue 27, point 1): the bytes a page with one
widget moves, and every section drawn from its slice exactly as from the whole recording."""
import json

import pytest

from explainer.embeds import SECTIONS
from explainer.management.commands import record_examples
from tests.browser.test_embed import author_page, console_errors, html  # noqa: F401 (fixtures)
from tests.browser.test_replay import save

MESSAGES = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
PARAMS = {"temperature": 0.7, "seed": 0, "max_new_tokens": 20}
DATA_BUDGET, PAGE_BUDGET = 60_000, 120_000  # bytes transferred: one <he-dice>'s data, the whole page with it


@pytest.fixture(scope="module")
def smollm2_run(site_url):
    """A real 20-token SmolLM2 run saved on the site: (its id, the whole recording as GET /api/runs/<id> gives it)."""
    recording = record_examples.record(record_examples.load_example_model(), MESSAGES, PARAMS, lens="auto")
    run_id = save(site_url, recording["payloads"], recording).rsplit("/", 1)[1]
    return run_id, recording


def transferred(page) -> list:
    """Each finished request's (url, bytes on the wire: headers and encoded body), as they finish."""
    seen = []
    page.on("requestfinished", lambda request: seen.append((request.url, sum(max(0, v) for k, v in request.sizes().items()
                                                                               if k.startswith("response")))))
    return seen


def test_a_page_with_one_dice_moves_its_slice_only(page, site_url, author_page, smollm2_run):
    run_id, _ = smollm2_run
    seen = transferred(page)
    page.goto(author_page("dice.html", html(site_url, f'<he-dice run="{run_id}"></he-dice>')))
    page.wait_for_selector("he-dice[data-rendered]", state="attached", timeout=30_000)
    page.wait_for_load_state("networkidle")
    data = [size for url, size in seen if "/api/runs/" in url]
    total = sum(size for url, size in seen if url.startswith(site_url))
    print(f"one <he-dice>: data {sum(data)} B in {len(data)} request(s), page from the site {total} B in {len(seen)} requests")
    assert [url for url, _ in seen if "/api/runs/" in url] == [f"{site_url}/api/runs/{run_id}/dice"]
    assert sum(data) <= DATA_BUDGET and total <= PAGE_BUDGET, seen


VISIBLE_TEXT = """(node) => node.shadowRoot.querySelector('.he-figure').innerText"""


@pytest.mark.parametrize("step", ["0", "2"])  # the prompt (the prefill's payload), and a decode step
def test_every_section_draws_the_same_from_its_slice_as_from_the_whole_recording(page, site_url, author_page, smollm2_run, step):
    run_id, recording = smollm2_run
    whole = json.dumps(recording).replace("</", "<\\/")
    pairs = "".join(f'<he-{s} run="{run_id}" step="{step}" data-from="slice"></he-{s}>'
                    f'<he-{s} src="#whole" step="{step}" data-from="whole"></he-{s}>' for s in SECTIONS)
    page.goto(author_page("pairs.html", html(site_url, pairs + f'<script type="application/json" id="whole">{whole}</script>')))
    for section in SECTIONS:
        both = page.locator(f"he-{section}")
        for k in range(2):
            both.nth(k).evaluate("(node) => node.scrollIntoView({block: 'center'})")
            page.wait_for_selector(f"he-{section}[data-from={['slice', 'whole'][k]}][data-rendered]", state="attached", timeout=30_000)
        sliced, full = both.nth(0).evaluate(VISIBLE_TEXT), both.nth(1).evaluate(VISIBLE_TEXT)
        assert sliced.strip() and sliced == full, section


def test_download_data_gives_the_slice_as_a_file_that_src_draws_and_another_section_refuses(page, site_url, author_page, smollm2_run):
    """The export bar's "Download data": the slice the element loaded, as a file; `src=` draws the same diagram from
    it with no request to the server, and a section it was not cut for says so by name."""
    run_id, _ = smollm2_run
    page.goto(author_page("from-run.html", html(site_url, f'<he-dice run="{run_id}" step="2"></he-dice>')))
    page.wait_for_selector("he-dice[data-rendered]", state="attached", timeout=30_000)
    drawn = page.locator("he-dice").evaluate(VISIBLE_TEXT)
    with page.expect_download(timeout=20_000) as info:
        page.locator("he-dice .he-export-bar button[data-export=data]").click()
    assert info.value.suggested_filename.endswith(".json")
    saved = json.loads(open(info.value.path(), encoding="utf-8").read())
    assert saved["slice"]["section"] == "dice" and saved["id"] == run_id
    url = author_page("dice.json", json.dumps(saved))
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/api/" in request.url else None)
    body = '<he-dice src="dice.json" step="2" id="mine"></he-dice><he-attention src="dice.json" id="other"></he-attention>'
    page.goto(author_page("from-file.html", html(site_url, body)))
    page.wait_for_selector("#mine[data-rendered]", state="attached", timeout=30_000)
    assert page.locator("#mine").evaluate(VISIBLE_TEXT) == drawn
    caption = page.locator("#other .he-embed-caption")
    caption.wait_for(timeout=20_000)
    assert "the dice slice of a recording" in caption.inner_text() and asked == [], (caption.inner_text(), asked)
    assert url.endswith("/dice.json")
