"""The serving view on the live page: each diagram measures on this server when it first comes into view
(the article's prompt, shared by every visitor), again on the visitor's prompt when asked, and draws the
numbers of the `serving` frame it got back."""
import math
import json
import os

import pytest
from playwright.sync_api import expect
from test_article import collect_frames, run_prompt

from inference.loading import BUNDLED_DIR

DEFAULT_PROMPT = "The mole on my face may need a biopsy. Explain this simply."


def collect_sent(page) -> list[dict]:
    """Every frame the page sends (to check that nothing is measured unasked)."""
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))))
    page.sent_frames = sent
    return sent


def measure(page, frames, selector: str, what: str, button: str | None = None, timeout_s: float = 300,
            slow: bool = False) -> dict:
    """Bring the diagram on screen (it measures by itself, on the article's prompt), then click its measure
    button; the first `serving` frame for `what` (or a refusal) after the click.

    ``slow``: the measurement takes seconds, so the diagram must say it is measuring right after the click."""
    page.locator(selector).scroll_into_view_if_needed()  # diagrams draw (and so have their button) only on screen
    for _ in range(120):  # the measurement it makes on sight, before the click's
        if any(f.get("type") == "measure" and f.get("what") == what and f.get("prompt") == "article" for f in page.sent_frames):
            break
        page.wait_for_timeout(250)
    else:
        pytest.fail(f"{selector} did not measure {what} on sight")
    control = page.locator(f"{selector} {button or f'button.he-measure[data-what={what}]'}").first
    expect(control).to_be_enabled(timeout=timeout_s * 1000)  # once the measurement it made on sight is back
    for _ in range(300):  # that answer's frame is in `frames` before counting (else it would pass for the click's)
        if any(f.get("type") == "error" or (f.get("type") == "serving" and f.get("what") == what) for f in frames):
            break
        page.wait_for_timeout(50)
    seen = len(frames)
    control.click()
    if slow:
        assert page.locator(f"{selector} .he-status").first.inner_text().startswith("measuring")
        assert control.is_disabled()
    for _ in range(int(timeout_s * 4)):
        for frame in frames[seen:]:
            if frame.get("type") == "serving" and frame.get("what") == what:
                return frame
            if frame.get("type") == "error":
                return frame
        page.wait_for_timeout(250)
    pytest.fail(f"no serving frame for {what}; frames since the click: {[f.get('type') for f in frames[seen:]]}")


def attr(page, selector: str, name: str, timeout_ms: int = 15_000) -> str:
    element = page.locator(selector)
    element.scroll_into_view_if_needed()
    page.wait_for_selector(f"{selector}[{name}]", state="attached", timeout=timeout_ms)
    return element.get_attribute(name)


def test_every_serving_diagram_draws_its_measurement(page, site_url):
    frames = collect_frames(page)
    sent = collect_sent(page)
    run = run_prompt(page, site_url, frames, text=DEFAULT_PROMPT, max_new_tokens=8)
    assert not run["error"], run["error"]
    steps = run["step"]

    # (a) nothing is measured before its section is on screen; the timeline is drawn from the run itself.
    assert not [f for f in sent if f.get("type") == "measure"]
    assert float(attr(page, "he-timeline", "data-ttft-ms")) == steps[0]["timing"]["ttft_ms"]
    # the causal-mask check, run after the first token (issue 24): its own time beside the wait for that token
    causal = next(c for c in run["check"] if c["name"] == "causal_mask")
    assert float(attr(page, "he-timeline", "data-check-ms")) == causal["data"]["measured_ms"]
    expect(page.locator("he-timeline")).to_contain_text("causal-mask check")
    # vLLM's serving metrics of this run (issue 24 point 7), recomputed from the payloads: ITL from the steps'
    # server times (median and p95, nearest rank), E2E from done.
    times = [s["timing"]["elapsed_ms"] for s in steps]
    gaps = sorted(b - a for a, b in zip(times, times[1:]))
    rank = lambda q: gaps[min(len(gaps) - 1, math.ceil(q * len(gaps)) - 1)]  # noqa: E731
    assert float(attr(page, "he-timeline", "data-itl-median-ms")) == pytest.approx(rank(0.5), abs=1e-6)
    assert float(attr(page, "he-timeline", "data-itl-p95-ms")) == pytest.approx(rank(0.95), abs=1e-6)
    assert float(attr(page, "he-timeline", "data-e2e-ms")) == run["done"][-1]["timing"]["total_ms"]
    expect(page.locator("he-timeline")).to_contain_text("inter-token latency")

    frame = measure(page, frames, "he-timeline", "prefill_decode")
    assert frame["type"] == "serving", frame
    assert attr(page, "he-timeline", "data-lengths") == ",".join(str(r["prompt_tokens"]) for r in frame["data"]["rows"])

    # The prefix cache (issue 24 point 4): this prefill's cached tokens, and the saving measured on this prompt.
    prefill = run["prefill"][-1]
    assert attr(page, "he-timeline", "data-cached-tokens") == str(prefill["cached_tokens"])
    frame = measure(page, frames, "he-timeline", "prefix")
    assert frame["type"] == "serving" and frame["prompt"] == "yours", frame
    assert frame["data"]["prompt_tokens"] == len(prefill["tokens"]) and frame["data"]["cached_tokens"] == prefill["cached_tokens"]
    assert float(attr(page, "he-timeline", "data-prefix-saved-ms")) == frame["data"]["saved_ms"]
    expect(page.locator("he-timeline .he-prefix-saved")).to_contain_text("Measured now on this server" if prefill["cached_tokens"]
                                                                          else "Nothing of this prompt came from the cache")

    frame = measure(page, frames, "he-kvcalc", "kv")
    assert frame["type"] == "serving", frame
    opt = next(r for r in frame["data"]["rows"] if r["key"] == "opt-13b")
    assert attr(page, "he-kvcalc", "data-opt-bytes-per-token") == str(opt["bytes_per_token"]) == "819200"
    assert page.locator("he-kvcalc tr[data-key=opt-13b]").count() == 1

    page.locator("he-kvcalc input[name=memory_gib]").fill("1")
    page.locator("he-kvcalc input[name=context_tokens]").fill("512")
    frame = measure(page, frames, "he-kvcalc", "capacity", button=".he-form button.he-measure")
    assert frame["type"] == "serving", frame
    assert frame["data"]["memory_bytes"] == 1 << 30 and frame["data"]["context_tokens"] == 512  # the form's GiB → bytes
    if os.environ.get("EXPLAINER_TEST_MODEL", "bundled") == "bundled":  # the answer, worked out here from the config
        config = json.loads((BUNDLED_DIR / "config.json").read_text())
        per_visitor = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * 4 * 512  # K and V, float32
        assert frame["data"]["kv_bytes_per_visitor"] == per_visitor
        assert frame["data"]["visitors"] == ((1 << 30) - frame["data"]["weight_bytes"]) // per_visitor > 0
    assert attr(page, "he-kvcalc", "data-visitors") == str(frame["data"]["visitors"])

    frame = measure(page, frames, "he-batch", "batch", slow=True)
    assert frame["type"] == "serving", frame
    assert attr(page, "he-batch", "data-batch-sizes") == ",".join(str(r["batch_size"]) for r in frame["data"]["runs"])

    frame = measure(page, frames, "he-speculative", "speculative")  # the draft ships in inference/bundled_draft
    assert frame["type"] == "serving", frame
    assert 0 <= frame["data"]["acceptance_rate"] <= 1
    assert float(attr(page, "he-speculative", "data-acceptance-rate")) == frame["data"]["acceptance_rate"]

    frame = measure(page, frames, "he-quant", "quantize")
    assert frame["type"] == "serving", frame
    assert attr(page, "he-quant", "data-weight-bytes-after") == str(frame["data"]["weight_bytes_after"])

    # Each diagram measured once by itself on the article's prompt when it came on screen, then on the click.
    asked = [(f["what"], f.get("prompt")) for f in sent if f.get("type") == "measure"]
    auto = [what for what, prompt in asked if prompt == "article"]
    # (a refused one is asked again when the server's `busy` says: another measurement held the model)
    assert set(auto) == {"prefill_decode", "prefix", "kv", "capacity", "batch", "speculative", "quantize"}
    clicked = list(dict.fromkeys(what for what, prompt in asked if prompt is None))
    assert clicked == ["prefill_decode", "prefix", "kv", "capacity", "batch", "speculative", "quantize"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert not page.errors, page.errors
