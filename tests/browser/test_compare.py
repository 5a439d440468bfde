"""Compare mode on the article (issue 29) in Chromium: two runs of one prompt side by side, step-locked. What
<he-compare> and the A/B diagrams show is checked against the frames the page's socket received."""
import json

import pytest
from playwright.sync_api import expect

from tests.browser.test_accessibility import axe_page, scroll_through, violations  # noqa: F401 (a fixture)
from tests.browser.test_article import attr, collect_frames
from tests.browser.test_controls import hold_off_eos

PROMPT = "Why is the sky blue?"


def open_compare(page) -> None:
    """Press "Compare with…" and wait for run B's column; a failure says what the button was at that moment."""
    button = page.locator("#btn-compare")
    button.click()
    try:
        expect(button).to_have_attribute("aria-expanded", "true")
    except AssertionError as err:
        seen = page.evaluate("""() => {
            const b = document.querySelector("#btn-compare"), r = b.getBoundingClientRect();
            const at = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
            return {disabled: b.disabled, expanded: b.getAttribute("aria-expanded"), rect: [r.x, r.y, r.width, r.height],
                    at: at && (at.id || at.tagName), status: document.querySelector("#status-banner")?.textContent};
        }""")
        raise AssertionError(f"the compare column did not open: {seen}; page errors {page.errors}") from err
    expect(page.locator("#compare-params")).to_be_visible()


def run_compare(page, url, frames, *, temperature, seed=5, tokens=8, compare_temperature=None, weights=None):
    """Open the article, set run A, open "Compare with…", set run B, press Play; wait for the pair's end."""
    page.goto(url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)  # the socket is open
    page.locator("#messages textarea").first.fill(PROMPT)
    page.locator("input[name=max_new_tokens]").fill(str(tokens))
    page.locator("input[name=temperature]").fill(str(temperature))
    page.locator("input[name=seed]").fill(str(seed))
    hold_off_eos(page, tokens)  # both runs take every step: no EOS before max_new_tokens
    open_compare(page)
    column = page.locator("#compare-params")
    expect(column).to_contain_text("two of your generation slots")  # the cost, said before starting
    if compare_temperature is not None:
        page.locator("#compare-temperature").fill(str(compare_temperature))
    if weights:
        page.locator("#compare-weights").select_option(weights)
    page.locator("#btn-play").click()
    for _ in range(480):
        if any(f.get("type") == "status" and f.get("state") == "finished" for f in frames):
            break
        page.wait_for_timeout(250)
    else:
        pytest.fail(f"the pair did not finish; frames: {[(f.get('type'), f.get('run')) for f in frames]}")
    sent = [f for f in frames if f.get("type") in ("session", "prefill", "step", "done", "compare", "error", "busy")]
    assert not [f for f in sent if f["type"] in ("error", "busy")], sent
    return {"a": [f for f in sent if f["type"] == "step" and f.get("run") is None],
            "b": [f for f in sent if f["type"] == "step" and f.get("run") == "b"],
            "compare": [f for f in sent if f["type"] == "compare"],
            "session_b": next(f for f in sent if f["type"] == "session" and f.get("run") == "b")}


def shown(page) -> dict:
    """<he-compare>'s figures for the step it shows (its data attributes), once it is on screen."""
    view = page.locator("he-compare")
    view.scroll_into_view_if_needed()
    names = ["data-step", "data-kl", "data-js", "data-a-prob-of-b", "data-b-prob-of-a", "data-max-logit-diff",
             "data-token-a", "data-token-b", "data-first-parting-step"]
    return {name: view.get_attribute(name) for name in names}


def test_two_temperatures_part_where_their_tokens_first_differ(axe_page, smollm2_url):
    """SmolLM2 at temperature 0.2 against 1.3 (one seed): the parting marker sits on the first step whose two step
    payloads drew different ids; the step shown says the compare message's figures, consistent with both steps; the
    step bar (keys and a token's click) moves <he-compare> and both runs' diagrams together; axe finds nothing."""
    page = axe_page
    frames = collect_frames(page)
    run = run_compare(page, smollm2_url, frames, temperature=0.2, compare_temperature=1.3, seed=5, tokens=10)
    a_steps, b_steps, compares = run["a"], run["b"], run["compare"]
    assert run["session_b"]["compare"]["changed"] == {"temperature": 1.3}
    assert [s["step"] for s in a_steps] == [s["step"] for s in b_steps] == [c["step"] for c in compares] == list(range(1, 11))
    parted = [a["step"] for a, b in zip(a_steps, b_steps) if a["token"]["id"] != b["token"]["id"]]
    assert parted, "temperature 0.2 and 1.3 drew the same ten tokens on this seed: pick another seed"
    first = parted[0]

    view = page.locator("he-compare")
    view.scroll_into_view_if_needed()
    expect(view).to_have_attribute("data-first-parting-step", str(first))
    marker = view.locator("th.parted-at")
    expect(marker).to_have_count(1)
    expect(marker).to_have_attribute("data-step", str(first))
    expect(marker).to_contain_text("parts here")  # words, not colour alone
    expect(view.locator(".he-cmp-parting")).to_contain_text(f"They part here: step {first}")
    # Both replies aligned: each step's column holds the two tokens the step payloads drew.
    for a, b in zip(a_steps, b_steps):
        expect(view.locator(f'button[data-run="a"][data-step="{a["step"]}"]')).to_have_attribute("data-id", str(a["token"]["id"]))
        expect(view.locator(f'button[data-run="b"][data-step="{b["step"]}"]')).to_have_attribute("data-id", str(b["token"]["id"]))

    # A token's click moves the page's step bar to its step; the figures are that step's compare message's.
    view.locator(f'button[data-run="b"][data-step="{first}"]').click()
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(first))
    expect(view).to_have_attribute("data-step", str(first))
    c, a, b = compares[first - 1], a_steps[first - 1], b_steps[first - 1]
    assert (c["token_a"]["id"], c["token_b"]["id"]) == (a["token"]["id"], b["token"]["id"]) and c["parted"]
    assert c["token_a"]["prob"] == pytest.approx(a["token"]["prob"], abs=1e-6)
    assert c["token_b"]["prob"] == pytest.approx(b["token"]["prob"], abs=1e-6)
    figures = shown(page)
    assert figures["data-kl"] == "inf" if c["kl_infinite"] else float(figures["data-kl"]) == c["kl"]  # String(x): exact
    assert float(figures["data-js"]) == c["js"]
    assert float(figures["data-a-prob-of-b"]) == c["a_prob_of_b"] and float(figures["data-b-prob-of-a"]) == c["b_prob_of_a"]
    assert (figures["data-token-a"], figures["data-token-b"]) == (str(a["token"]["id"]), str(b["token"]["id"]))
    # What the reader sees: the KL row says the compare's KL, the "other run's token" row A's probability of B's token.
    kl_cell = view.locator("tr[data-row=kl] td")
    if not c["kl_infinite"]:
        expect(kl_cell).to_have_text(f"{c['kl']:.4f} nats")
    assert float(view.locator("tr[data-row=other] td").first.get_attribute("data-value")) == c["a_prob_of_b"]
    expect(view.locator("tr[data-row=token] td").nth(0)).to_have_attribute("data-value", str(a["token"]["id"]))
    expect(view.locator("tr[data-row=token] td").nth(1)).to_have_attribute("data-value", str(b["token"]["id"]))
    # Each run's cost: its last step's tokens/s and this step's KV-cache bytes.
    assert float(view.get_attribute("data-tokens-per-s-a")) == a_steps[-1]["timing"]["tokens_per_s"]
    assert int(view.get_attribute("data-kv-bytes-b")) == b["kv"]["bytes"]

    # The keyboard on the step bar moves <he-compare> and both runs' diagrams, A's and B's, together.
    other = first + 1 if first < len(a_steps) else first - 1
    page.locator("#replay-bar").focus()
    page.keyboard.press("ArrowRight" if other > first else "ArrowLeft")
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(other))
    expect(page.locator("#replay-range")).to_have_value(str(other))
    assert shown(page)["data-step"] == str(other)
    assert float(shown(page)["data-js"]) == compares[other - 1]["js"]
    for name in ("he-logits", "he-dice", "he-kv"):
        for side in (f"{name}:not([data-run])", f'{name}[data-run="b"]'):
            attr(page, side, "data-step")  # on screen: drawn
            expect(page.locator(side)).to_have_attribute("data-step", str(other))
    expect(page.locator('he-logits[data-run="b"]')).to_have_attribute("data-top-id", str(b_steps[other - 1]["logits"]["top"][0]["id"]))
    expect(page.locator('he-logits:not([data-run])')).to_have_attribute("data-top-id", str(a_steps[other - 1]["logits"]["top"][0]["id"]))
    # Each side says which run it is; the diagrams without a side-by-side form say they show run A.
    expect(page.locator('#logits .compare-label[data-run="a"]')).to_have_text("A: temperature 0.2")
    expect(page.locator('#logits .compare-label[data-run="b"]')).to_have_text("B: temperature 1.3")
    expect(page.locator("#attention .compare-note")).to_contain_text("Showing run A")
    expect(page.locator("#reply-b")).to_have_text("".join(s["text_delta"] for s in b_steps))

    scroll_through(page)
    found = violations(page, frames=False)
    assert not found, found

    # "Save run" keeps both runs and the compares; the permalink replays the pair, parting marker and all.
    expect(page.locator("#btn-save")).to_be_enabled()
    page.locator("#btn-save").click()
    expect(page.locator("#permalink")).to_contain_text("Saved:")
    page.goto(smollm2_url + page.locator("#permalink").get_attribute("href"))
    replayed = page.locator("he-compare")
    expect(replayed).to_be_attached()
    replayed.scroll_into_view_if_needed()
    expect(replayed).to_have_attribute("data-first-parting-step", str(first))
    expect(replayed.locator(f'button[data-run="b"][data-step="{first}"]')).to_have_attribute("data-id", str(b_steps[first - 1]["token"]["id"]))
    assert not page.errors, page.errors

    # An author's embed of the saved pair: `compare` draws run B's logits beside run A's, both at the scrubber's step.
    run_id = page.url.rstrip("/").split("/")[-1]
    page.goto(f"{smollm2_url}/embed/logits/?run={run_id}&compare=1")
    a_side, b_side = page.locator("he-logits:not([data-he-twin])"), page.locator("he-logits[data-he-twin]")
    expect(b_side).to_have_count(1)
    expect(page.locator('.he-embed-run-label[data-run="b"]')).to_have_text("B: temperature 1.3")
    expect(page.locator('.he-embed-run-label[data-run="a"]')).to_have_text("A: temperature 0.2")
    scrubber = a_side.locator(".he-embed-scrubber input")
    scrubber.fill(str(first))
    for side, steps in ((a_side, a_steps), (b_side, b_steps)):
        expect(side).to_have_attribute("data-step", str(first))
        expect(side).to_have_attribute("data-top-id", str(steps[first - 1]["logits"]["top"][0]["id"]))
    assert not page.errors, page.errors


@pytest.fixture(scope="module")
def smollm2_here():
    """SmolLM2 in the test's own process: the KL recomputed from the payloads, apart from the server's code."""
    from inference.loading import load_model
    return load_model("smollm2-135m-instruct", device="cpu")


def test_the_kl_shown_is_recomputed_from_the_payloads(page, smollm2_url, smollm2_here):
    """Each step's KL, recomputed here from what the payloads say (the prompt's ids, each run's tokens before the
    step, each run's temperature): a fresh forward pass over each run's own context, softmax(logits / T), and
    sum p_A log(p_A / p_B) in float64, within 1e-3 of the compare message's KL at every step."""
    import torch

    frames = collect_frames(page)
    run = run_compare(page, smollm2_url, frames, temperature=0.2, compare_temperature=1.3, seed=5, tokens=6)
    prompt = [t["id"] for t in next(f for f in frames if f.get("type") == "prefill" and f.get("run") is None)["tokens"]]
    model = smollm2_here.model

    def final(steps, step, temperature):
        ids = torch.tensor([prompt + [s["token"]["id"] for s in steps[:step - 1]]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -1].double()  # (vocab,)
        return torch.softmax(logits / temperature, -1)

    for c in run["compare"]:
        p, q = final(run["a"], c["step"], 0.2), final(run["b"], c["step"], 1.3)
        kl = float((p * (p.clamp_min(1e-300).log() - q.log())).sum())
        assert c["kl"] == pytest.approx(kl, rel=1e-3, abs=1e-4), (c["step"], c["kl"], kl)
        assert c["a_prob_of_b"] == pytest.approx(float(p[c["token_b"]["id"]]), rel=1e-3, abs=1e-6)


def test_the_int8_copy_shows_its_largest_logit_difference(page, site_url):
    """The bundled model, greedy, beside its int8 copy: B says int8 weights, and the step shown gives the compare
    message's largest raw-logit difference."""
    frames = collect_frames(page)
    run = run_compare(page, site_url, frames, temperature=0, weights="int8", tokens=4)
    assert run["session_b"]["compare"]["weights"] == "int8"
    compares = run["compare"]
    assert len(compares) == 4 and all(c["max_logit_diff"] is not None for c in compares)
    page.locator("#replay-bar").focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", "1")
    view = page.locator("he-compare")
    view.scroll_into_view_if_needed()
    expect(view).to_have_attribute("data-step", "1")
    assert float(view.get_attribute("data-max-logit-diff")) == compares[0]["max_logit_diff"]
    expect(view.locator("tr[data-row=max_logit_diff] td")).to_have_text(f"{compares[0]['max_logit_diff']:.4f}")
    expect(view.locator(".he-cmp-label.he-cmp-b")).to_have_text("B: int8 weights")
    expect(page.locator('#kv .compare-label[data-run="b"]')).to_have_text("B: int8 weights")
    assert not page.errors, page.errors

    # Saved, then "Run this live" from its permalink: the pair runs again, run B on the int8 copy again.
    page.locator("#btn-save").click()
    expect(page.locator("#permalink")).to_contain_text("Saved:")
    page.goto(site_url + page.locator("#permalink").get_attribute("href"))
    frames = collect_frames(page)
    page.locator("#run-live").click()
    expect(page.locator("#compare-weights")).to_have_value("int8")
    expect(page.locator("#status-banner")).to_contain_text("Finished", timeout=60_000)
    again = next(f for f in frames if f.get("type") == "session" and f.get("run") == "b")
    assert again["compare"]["weights"] == "int8" and again["params"]["seed"] == run["session_b"]["params"]["seed"]
    assert not page.errors, page.errors



def test_a_compare_without_two_free_slots_is_refused_in_the_banner(page, one_slot_url):
    """One generation slot on the server: the compare start's `busy` says in the banner that comparing needs two, and
    the page stays ready for another try (no run B, no run started)."""
    frames = collect_frames(page)
    page.goto(one_slot_url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)
    open_compare(page)
    page.locator("#compare-temperature").fill("1.3")
    page.locator("#btn-play").click()
    banner = page.locator("#status-banner")
    expect(banner).to_have_attribute("data-kind", "busy", timeout=30_000)
    expect(banner).to_contain_text("two of your generation slots")
    assert not [f for f in frames if f.get("type") == "session"], "a refused compare starts nothing"
    expect(page.locator("#compare-params")).to_be_visible()  # still comparing: Play tries the pair again
    expect(page.locator("#btn-play")).to_be_enabled()
    assert not page.errors, page.errors


def wait_for(page, frames, test, what, since=0):
    """Until a frame received from index `since` on passes `test` (the list grows as the socket reads)."""
    for _ in range(480):
        if any(test(f) for f in frames[since:]):
            return
        page.wait_for_timeout(250)
    pytest.fail(f"no {what}; frames: {[(f.get('type'), f.get('run'), f.get('step')) for f in frames]}")


def test_a_fork_names_the_run_of_the_diagram_it_was_asked_in(page, site_url):
    """Paused and stepped, a candidate clicked in run B's logits forks run "b" (B's step forced, A's re-stepped, not
    forced); "fork both with this token" in <he-compare> forks both with the same token."""
    frames, sent = collect_frames(page), []
    page.on("websocket", lambda ws: ws.on("framesent", lambda data: sent.append(json.loads(data))))
    page.goto(site_url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)
    page.locator("input[name=max_new_tokens]").fill("6")
    page.locator("input[name=seed]").fill("3")
    hold_off_eos(page, 6)
    open_compare(page)
    page.locator("#compare-temperature").fill("1.3")
    page.locator("#btn-step").click()  # from idle: the pair starts paused on the prefill
    wait_for(page, frames, lambda f: f.get("type") == "status" and f.get("state") == "paused", "paused status")
    for n in (1, 2, 3):
        expect(page.locator("#btn-step")).to_be_enabled()
        page.locator("#btn-step").click()
        wait_for(page, frames, lambda f, n=n: f.get("type") == "compare" and f["step"] == n, f"compare {n}")
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", "3")

    twin = page.locator('he-logits[data-run="b"]')
    twin.scroll_into_view_if_needed()
    expect(twin).to_have_attribute("data-step", "3")
    candidate = twin.locator("button.he-fork").first
    token = int(candidate.get_attribute("data-token-id"))
    seen = len(frames)
    candidate.click()
    wait_for(page, frames, lambda f: f.get("type") == "compare" and f["step"] == 3, "the fork's compare", since=seen)
    assert [m for m in sent if m["type"] == "fork"] == [{"type": "fork", "step": 3, "token_id": token, "run": "b"}]
    answer = frames[seen:]
    a3 = next(f for f in answer if f["type"] == "step" and f.get("run") is None)
    b3 = next(f for f in answer if f["type"] == "step" and f.get("run") == "b")
    assert (a3["step"], b3["step"]) == (3, 3) and b3["forced"] and b3["token"]["id"] == token and not a3["forced"]
    wait_for(page, frames, lambda f: f.get("type") == "status" and f.get("state") == "finished", "the end", since=seen)  # resumed

    page.locator("#replay-bar").focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    view = page.locator("he-compare")
    view.scroll_into_view_if_needed()
    expect(view).to_have_attribute("data-step", "2")
    both = view.locator("button.he-fork-both").nth(1)
    token = int(both.get_attribute("data-token-id"))
    seen = len(frames)
    both.click()
    wait_for(page, frames, lambda f: f.get("type") == "compare" and f["step"] == 2, "fork both's compare", since=seen)
    assert [m for m in sent if m["type"] == "fork"][-1] == {"type": "fork", "step": 2, "token_id": token, "run": "both"}
    c2 = next(f for f in frames[seen:] if f["type"] == "compare")
    assert c2["token_a"]["id"] == c2["token_b"]["id"] == token and not c2["parted"]
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", "2")
    assert not page.errors, page.errors
