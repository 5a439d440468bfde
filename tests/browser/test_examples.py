"""The article's first paint: a shipped example run drawn with no socket message, and the examples picker."""
import json
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.test_replay import shows

EXAMPLES = Path(__file__).resolve().parents[2] / "static" / "examples"
INDEX = json.loads((EXAMPLES / "index.json").read_text())


def example(n: int) -> dict:
    """The n-th shipped example's payloads by type (steps as a list)."""
    payloads = json.loads((EXAMPLES / INDEX[n]["file"]).read_text())["payloads"]
    out = {p["type"]: p for p in payloads if p["type"] != "step"}
    out["steps"] = [p for p in payloads if p["type"] == "step"]
    return out


def silent_socket(page) -> list:
    """Answer the page's WebSocket here, never reaching the server: no server message can arrive."""
    opened = []
    page.route_web_socket("**/ws/**", lambda ws: opened.append(ws.url))
    return opened


def test_first_paint_draws_the_example_without_the_server(page, site_url):
    opened = silent_socket(page)
    frames = []
    page.on("websocket", lambda ws: ws.on("framereceived", frames.append))
    run = example(0)
    steps, n = run["steps"], len(run["steps"])
    page.goto(site_url + "/")
    expect(page.locator("#example-note")).to_contain_text(f"recorded example run of {run['session']['model']['name']}")
    expect(page.locator("#example-note")).to_contain_text("press Play to run it live")
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")  # the first generated token, not the end
    shows(page, "he-template", "data-text-length", len(run["prefill"]["template"]["text"]))
    shows(page, "he-tokens", "data-token-count", len(run["prefill"]["tokens"]))
    shows(page, "he-mask", "data-check-passed", "true")
    shows(page, "he-logits", "data-top-id", steps[0]["logits"]["top"][0]["id"])
    shows(page, "he-dice", "data-u", steps[0]["draw"]["u"] if steps[0]["draw"] else "greedy")
    shows(page, "he-kv", "data-kv-bytes", steps[0]["kv"]["bytes"])
    shows(page, "he-sequence", "data-length", len(run["prefill"]["tokens"]) + 1)
    # At step 1 the stop section shows the run as it stood then (issue 23): no condition had fired unless it ended there.
    shows(page, "he-stop", "data-stop-reason", run["done"]["stop_reason"] if n == 1 else "")
    shows(page, "he-myths", "data-waiting", 0)  # the after-run checks came with the example
    shows(page, "he-myths", "data-failed", 0)
    assert page.locator("#reply").inner_text().strip() == run["done"]["text"].strip()
    assert opened and frames == []  # the page did open its socket, and no message came through it
    page.locator("[data-replay=first]").click()  # the step bar steps through examples too
    shows(page, "he-sequence", "data-length", len(run["prefill"]["tokens"]))
    page.locator("[data-replay=last]").click()
    shows(page, "he-logits", "data-top-id", steps[-1]["logits"]["top"][0]["id"])
    shows(page, "he-stop", "data-stop-reason", run["done"]["stop_reason"])  # the last step is where it stopped
    assert not page.errors, page.errors


def test_the_picker_switches_examples(page, site_url):
    silent_socket(page)
    page.goto(site_url + "/")
    picker = page.locator("#example-picker")
    expect(picker.locator("option")).to_have_count(len(INDEX))
    first = len(example(0)["steps"])
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {first}")
    other = example(1)
    picker.select_option(INDEX[1]["id"])
    n = len(other["steps"])
    expect(page.locator("#replay-readout")).to_have_text(f"step 1 of {n}")
    shows(page, "he-logits", "data-top-id", other["steps"][0]["logits"]["top"][0]["id"])
    shows(page, "he-tokens", "data-token-count", len(other["prefill"]["tokens"]))
    shows(page, "he-dice", "data-u", other["steps"][0]["draw"]["u"] if other["steps"][0]["draw"] else "greedy")
    assert page.locator("#reply").inner_text().strip() == other["done"]["text"].strip()
    # The prompt box now holds that example's prompt and parameters: Play would rerun it live.
    expect(page.locator("#messages textarea").first).to_have_value(INDEX[1]["prompt"])
    assert float(page.locator("input[name=temperature]").input_value()) == other["session"]["params"]["temperature"]
    assert not page.errors, page.errors


def test_play_replaces_the_example_with_the_live_run(page, site_url):
    from tests.browser.test_article import collect_frames

    frames = collect_frames(page)
    page.goto(site_url + "/")
    expect(page.locator("#example-bar")).to_be_visible()
    page.locator("#messages textarea").first.fill("What does bank mean?")
    page.locator("input[name=max_new_tokens]").fill("4")
    expect(page.locator("#btn-play")).to_be_enabled()
    page.locator("#btn-play").click()
    expect(page.locator("#example-note")).to_contain_text("Your live run", timeout=30_000)
    expect(page.locator("#example-bar")).to_be_visible()  # the examples stay to pick from after a live run
    expect(page.locator("#status-banner")).to_contain_text("Finished", timeout=60_000)
    expect(page.locator("#replay-bar")).to_be_visible()  # the one step bar, now over the live run
    steps = [f for f in frames if f.get("type") == "step"]
    prefill = next(f for f in frames if f.get("type") == "prefill")
    assert prefill["template"]["text"].count("What does bank mean?") == 1  # the visitor's prompt, not the example's
    shows(page, "he-sequence", "data-length", len(prefill["tokens"]) + len(steps))  # a finished run stays on its last step
    shows(page, "he-logits", "data-top-id", steps[-1]["logits"]["top"][0]["id"])
    assert not page.errors, page.errors
