"""The run controls as people press them (issue 11), in Chromium against Daphne with the Makefile's flags.

Enter runs, Shift+Enter is a newline, Ctrl+Enter runs, Escape stops; Stop ends the run within one step
of what the page showed when it was pressed (also after Pause → Step); Play works again afterwards;
each button is enabled exactly when its message is allowed, and the status line says the true state.
"""
import re

from playwright.sync_api import expect

from tests.browser.test_article import collect_frames

BANNER = "#status-banner"
STEP_TEXT = re.compile(r"step (\d+)")
FINISHED = re.compile(r"Finished \((\w+)\) after (\d+) steps?\b")
LONG = 256  # EXPLAINER_MAX_NEW_TOKENS: the longest run the server allows


def hold_off_eos(page, tokens: int = LONG) -> None:
    """Every run this page starts generates at least `tokens` tokens (min_new_tokens, inference/sampling.py):
    the bundled model ends most replies by EOS within half a second, sooner than a click lands under load,
    so a test that acts on a running run must use one that cannot end before it acts. The page sends every
    input of #params (prompt-form.js readParams), so the test adds the one field the form does not show."""
    page.evaluate("""(tokens) => {
        const input = Object.assign(document.createElement("input"), {type: "hidden", name: "min_new_tokens", value: String(tokens)});
        document.querySelector("#params").append(input);
    }""", tokens)


def count_starts(page) -> None:
    """window.__starts: how many `start` messages the page has sent (a run asked for, synchronously on the key)."""
    page.evaluate("""() => {
        window.__starts = 0;
        const send = WebSocket.prototype.send;
        WebSocket.prototype.send = function (data) {
            try { if (JSON.parse(data).type === "start") window.__starts += 1; } catch (e) {}
            return send.call(this, data);
        };
    }""")


def open_article(page, site_url, text="Tell me a long story about a mole.", max_new_tokens=200):
    page.goto(site_url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=30_000)  # the socket is open
    box = page.locator("#messages textarea").first
    box.fill(text)
    page.locator("input[name=max_new_tokens]").fill(str(max_new_tokens))
    return box


def steps_shown(page) -> int:
    match = STEP_TEXT.search(page.locator(BANNER).inner_text())
    return int(match.group(1)) if match else 0


def wait_for_step(page, at_least: int) -> None:
    expect(page.locator(BANNER)).to_have_text(re.compile(r"(Generating… step|Paused after step) (\d\d+|[%d-9])" % at_least),
                                              timeout=60_000)


def finished(page) -> tuple[str, int]:
    expect(page.locator(BANNER)).to_have_text(FINISHED, timeout=60_000)
    reason, steps = FINISHED.search(page.locator(BANNER).inner_text()).groups()
    return reason, int(steps)


def buttons(page) -> dict[str, bool]:
    """Which controls are enabled now."""
    return {name: page.locator(f"#btn-{name}").is_enabled() for name in ("play", "pause", "resume", "step", "stop")}


def record_steps_at_stop_click(page) -> None:
    """Note the step the page shows at the instant Stop is pressed (before the page handles the click)."""
    page.evaluate("""() => document.addEventListener("click", (e) => {
        if (e.target.id === "btn-stop") window.__shownAtStop = document.querySelector("#status-banner").textContent;
    }, true)""")


def run_then_escape(page) -> int:
    """The run just asked for is seen generating, then Escape stops it; its step count."""
    expect(page.locator(BANNER)).not_to_have_text(FINISHED, timeout=10_000)  # a new run began
    wait_for_step(page, 1)
    page.keyboard.press("Escape")
    return finished(page)[1]


def test_enter_runs_shift_enter_is_a_newline_and_ctrl_enter_runs(page, site_url):
    # Each run goes on until the test stops it (no EOS before LONG tokens): a short run could end before
    # the banner is read, and "a new run began" would then be missed.
    box = open_article(page, site_url, text="Hello", max_new_tokens=LONG)
    hold_off_eos(page)
    count_starts(page)
    box.press("Shift+Enter")
    box.type("there")
    assert box.input_value() == "Hello\nthere"  # a newline, and nothing started
    assert page.evaluate("window.__starts") == 0  # the keys' handlers run synchronously: no start was sent
    assert not re.search(r"step|Finished|Reading", page.locator(BANNER).inner_text())
    box.press("Enter")
    assert page.evaluate("window.__starts") == 1
    assert run_then_escape(page) >= 1  # Enter in the prompt box ran it
    assert box.input_value() == "Hello\nthere"
    box.press("Control+Enter")
    assert page.evaluate("window.__starts") == 2
    assert run_then_escape(page) >= 1
    page.locator("input[name=seed]").press("Enter")  # a parameter box runs too: every field agrees
    assert page.evaluate("window.__starts") == 3
    run_then_escape(page)
    assert not page.errors, page.errors


def click_stop_when_step_3_is_shown(page) -> None:
    """Press Stop the moment the status line shows step 3 (Playwright's own click lands steps later)."""
    page.evaluate("""() => {
        const banner = document.querySelector("#status-banner");
        new MutationObserver((_, observer) => {
            if (/Generating… step 3$/.test(banner.textContent)) { observer.disconnect(); document.querySelector("#btn-stop").click(); }
        }).observe(banner, {childList: true, characterData: true, subtree: true});
    }""")


def test_stop_at_step_3_then_play_again(page, site_url):
    box = open_article(page, site_url, max_new_tokens=LONG)
    hold_off_eos(page)  # every run here ends by Stop or Escape, never by EOS before the click lands
    click_stop_when_step_3_is_shown(page)
    record_steps_at_stop_click(page)
    box.press("Enter")
    reason, steps = finished(page)
    assert page.evaluate("window.__shownAtStop").endswith("step 3")
    assert reason == "stopped" and steps <= 4, (reason, steps)
    assert buttons(page) == {"play": True, "pause": False, "resume": False, "step": True, "stop": False}
    page.locator("#btn-play").click()  # Play works again; this time Playwright clicks Stop
    wait_for_step(page, 3)
    state = buttons(page)
    if "Generating" in page.locator(BANNER).inner_text():
        assert state == {"play": True, "pause": True, "resume": False, "step": False, "stop": True}, state
    page.locator("#btn-stop").click()
    shown = int(STEP_TEXT.search(page.evaluate("window.__shownAtStop")).group(1))
    reason, steps = finished(page)
    assert reason == "stopped" and shown >= 3 and steps <= shown + 1, (reason, shown, steps)
    print(f"\nStop clicked by Playwright with step {shown} shown; the run ended after {steps} steps")
    page.locator("#btn-play").click()
    expect(page.locator(BANNER)).not_to_have_text(FINISHED, timeout=10_000)
    wait_for_step(page, 1)
    page.keyboard.press("Escape")  # Escape stops a running run
    reason, _ = finished(page)
    assert reason == "stopped"
    assert not page.errors, page.errors


def test_pause_step_stop(page, site_url):
    box = open_article(page, site_url, max_new_tokens=LONG)
    hold_off_eos(page)  # the run cannot end by EOS before Pause lands
    box.press("Enter")
    # Pause as soon as it is enabled (the bundled model would end this reply by EOS within half a second
    # without hold_off_eos). Paused on the prefill or at a step.
    page.locator("#btn-pause").click()
    expect(page.locator(BANNER)).to_have_text(re.compile(r"Paused after (step \d+\.|the prefill)"), timeout=10_000)
    paused_at = steps_shown(page)
    assert buttons(page) == {"play": True, "pause": False, "resume": True, "step": True, "stop": True}
    page.wait_for_timeout(500)
    assert steps_shown(page) == paused_at  # pause holds
    page.locator("#btn-step").click()
    expect(page.locator(BANNER)).to_have_text(f"Paused after step {paused_at + 1}.", timeout=10_000)
    page.locator("#btn-stop").click()
    reason, steps = finished(page)
    assert (reason, steps) == ("stopped", paused_at + 1)  # nothing more than the step asked for
    page.wait_for_timeout(300)
    assert FINISHED.search(page.locator(BANNER).inner_text())  # and nothing of that run after its done
    page.locator("#btn-play").click()
    expect(page.locator(BANNER)).not_to_have_text(FINISHED, timeout=10_000)
    page.locator("#btn-stop").click()
    assert finished(page)[0] in ("stopped", "eos")
    assert not page.errors, page.errors


def test_the_batching_section_says_how_the_visitors_own_run_was_batched(page, site_url):
    frames = collect_frames(page)
    box = open_article(page, site_url, text="What does bank mean?", max_new_tokens=4)
    box.press("Enter")
    reason, steps = finished(page)
    page.locator("he-batch").scroll_into_view_if_needed()
    line = page.locator("he-batch .he-live")
    # a lone visitor: every pass was its own (the server says so in each prefill and step payload); the start of
    # the prompt may have come from the prefix cache (an earlier test's run of the same template)
    cached = [f for f in frames if f.get("type") == "prefill"][-1]["cached_tokens"]
    reused = f" (its first {cached} token{'s' if cached != 1 else ''} from the prefix cache, computed by an earlier prefill)" if cached else ""
    expect(line).to_have_text(f"Your step {steps} ran in a batch of 1 (alone). Your prompt was prefilled alone{reused}.")
