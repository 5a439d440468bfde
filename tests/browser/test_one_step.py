"""One truth at every step (issue 23): walking a recorded run, every section shows the run as it stood after the
page's step k, in its data attributes and in its prose, and they agree with each other and with the payloads."""
import re

from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_examples import example, silent_socket
from tests.browser.test_replay import record, shows


def walk_to(page, k: int, n: int) -> None:
    page.locator("#replay-range").fill(str(k))
    expect(page.locator("#replay-readout")).to_have_text(f"step {k} of {n}")


def figures_agree(page, k: int, prefill: dict, steps: list[dict]) -> None:
    """Tokens so far, cache positions and bytes, step number, batch size: the same in every section at step k."""
    P, step = len(prefill["tokens"]), steps[k - 1]
    kv = step["kv"]
    assert kv["seq_len"] == P + k - 1  # the payloads' own truth, which the sections must repeat
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(k))
    for selector in ("he-kv", "he-sequence", "he-context", "he-layers", "he-stop", "he-logits"):
        shows(page, selector, "data-step", k)
    shows(page, "he-kv", "data-kv-bytes", kv["bytes"])
    shows(page, "he-context", "data-kv-bytes", kv["bytes"])
    shows(page, "he-context", "data-kv-positions", kv["seq_len"])
    shows(page, "he-context", "data-positions-used", P + k)
    shows(page, "he-sequence", "data-length", P + k)
    # The prose says the same figures (the learner reads these, not the attributes).
    context = page.locator("he-context")
    expect(context.locator(".he-kv-now")).to_contain_text(f"KV cache after step {k}: {kv['seq_len']:,} positions")
    expect(context.locator(".he-big")).to_contain_text(f"{P + k:,} of ")
    expect(page.locator("he-kv .he-caption")).to_contain_text(f"after step {k} ")
    expect(page.locator("he-kv .he-caption")).to_contain_text(f"holds {kv['seq_len']:,} positions")
    expect(page.locator("he-stop [data-reason=max_new_tokens]")).to_contain_text(f"{k} step{'' if k == 1 else 's'} of max_new_tokens")
    if step.get("batch_size"):
        shows(page, "he-batch", "data-batch-size", step["batch_size"])
        expect(page.locator("he-batch .he-live").first).to_contain_text(f"Your step {k} ran in a batch of {step['batch_size']}")
    shows(page, "he-stream", "data-step", k)  # the stream as it stood: k rows, the reply so far
    shows(page, "he-stream", "data-text-length", len("".join(s["text_delta"] for s in steps[:k])))
    expect(page.locator("he-stream .he-col-sub")).to_contain_text(f"the reply after step {k} of {len(steps)}")
    expect(page.locator("he-stream tbody tr")).to_have_count(k)
    page.locator("he-timeline").scroll_into_view_if_needed()  # the run's clock covers the whole run, and says so
    expect(page.locator("he-timeline .he-subhead").first).to_contain_text("whole run")


def test_every_section_shows_the_page_step(page, site_url):
    url, payloads = record(site_url)
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    n = len(steps)
    assert n >= 4, "a run long enough to have a middle step"
    page.goto(site_url + url)
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")
    for k in (1, 2, n // 2, n):
        walk_to(page, k, n)
        figures_agree(page, k, prefill, steps)
    assert not page.errors, page.errors


def test_every_section_shows_the_page_step_on_the_recorded_smollm2_example(page, site_url):
    """The same walk over a recorded SmolLM2-135M-Instruct run: the article's first example, 30 layers."""
    silent_socket(page)
    run = example(0)
    assert run["session"]["model"]["spec"] == "smollm2-135m-instruct" and run["session"]["model"]["layers"] == 30
    n = len(run["steps"])
    page.goto(site_url + "/")
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")
    for k in (1, 2, n // 2, n):
        walk_to(page, k, n)
        figures_agree(page, k, run["prefill"], run["steps"])
    assert not page.errors, page.errors


def test_fork_chips_keep_their_step_under_the_pointer(page, site_url):
    url, payloads = record(site_url)
    n = len([p for p in payloads if p["type"] == "step"])
    page.goto(site_url + url)
    walk_to(page, 2, n)
    logits = page.locator("he-logits")
    logits.scroll_into_view_if_needed()
    row = logits.locator(".he-forks")
    expect(row).to_have_attribute("data-step", "2")
    logits.locator("button.he-fork").first.hover()
    page.keyboard.press("ArrowRight")  # the page moves on while the pointer rests on a chip
    expect(page.locator("#replay-readout")).to_have_text(f"step 3 of {n}")
    shows(page, "he-logits", "data-step", 3)
    expect(row).to_have_attribute("data-step", "2")  # the chips under the pointer still fork step 2
    expect(row).to_have_attribute("aria-label", re.compile("Fork step 2"))
    page.mouse.move(0, 0)
    expect(row).to_have_attribute("data-step", "3")  # redrawn for the page's step once the pointer left


def test_a_finished_run_stays_on_its_last_step(page, site_url):
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, max_new_tokens=5)
    assert not run["error"], run["error"]
    n = len(run["step"])
    expect(page.locator("#replay-readout")).to_have_text(f"step {n} of {n}")
    figures_agree(page, n, run["prefill"][-1], run["step"])
