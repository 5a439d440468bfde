"""The learner's page (issue 13): the first screen runs, one step bar moves every diagram, the map is the table
of contents, a candidate click forks the run, and a permalink fills the form and runs live."""
import re

from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_examples import INDEX, example, silent_socket
from tests.browser.test_replay import MESSAGES, record, shows

# Every diagram that shows one step: each reports the step it shows as data-step.
STEPPED = ["he-logits", "he-stages", "he-filter", "he-dice", "he-sequence", "he-kv", "he-attention", "he-layers", "he-pipeline"]


def bar_at(page, k: int) -> None:
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(k))


def inside(box: dict, width: int, height: int) -> bool:
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= width and box["y"] + box["height"] <= height


def test_first_screen_holds_prompt_and_play(page, site_url):
    page.goto(site_url + "/")
    expect(page.locator("#messages textarea").first).to_be_visible()
    expect(page.locator(".model-notice")).to_be_visible()  # the model notice: name, size, what to expect
    expect(page.locator(".model-description")).to_be_hidden()  # its config table folds away under it
    for selector in (".lede", "#messages textarea", "#btn-play", ".model-notice"):
        box = page.locator(selector).first.bounding_box()
        assert inside(box, 1280, 900), (selector, box)
    page.locator("#messages textarea").first.fill("What does bank mean?")
    page.locator("#messages textarea").first.press("Enter")  # Enter runs
    expect(page.locator("#status-banner")).to_contain_text(re.compile("Generating|Reading|Finished"), timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "learner-first-screen-1280x900.png"))


def test_phone_map_folds_within_15_percent(browser, site_url):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    silent_socket(page)
    page.goto(site_url + "/")
    bar_at(page, 1)
    page.locator("#logits").scroll_into_view_if_needed()
    toggle = page.locator("he-pipeline .he-toggle")
    expect(toggle).to_be_visible()
    expect(page.locator("he-pipeline .he-list")).to_be_hidden()  # folded on a phone
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "learner-phone-390x844.png"))
    toggle.click()
    expect(page.locator("he-pipeline .he-list")).to_be_visible()
    assert page.locator("he-pipeline").bounding_box()["height"] <= 0.15 * 844
    page.screenshot(path=str(ARTIFACTS / "learner-phone-map-open-390x844.png"))
    context.close()


def test_the_step_bar_moves_every_diagram(page, site_url):
    silent_socket(page)
    run = example(0)
    n = len(run["steps"])
    page.goto(site_url + "/")
    bar_at(page, 1)
    page.locator("#replay-range").fill("2")
    bar_at(page, 2)
    for selector in STEPPED:
        shows(page, selector, "data-step", 2)
    shows(page, "he-logits", "data-top-id", run["steps"][1]["logits"]["top"][0]["id"])
    assert page.locator("he-logits input[type=range], he-attention input[type=range], he-sequence input[type=range]").count() == 0
    assert re.search(r"#step=2$", page.url)
    # The keys scrub from anywhere on the page that is not a control.
    page.locator("#tokens h2").click()
    page.keyboard.press("Home")
    bar_at(page, 0)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    bar_at(page, 3)
    page.keyboard.press("ArrowLeft")
    bar_at(page, 2)
    page.keyboard.press("End")
    bar_at(page, n)
    shows(page, "he-dice", "data-step", n)
    assert re.search(rf"#step={n}$", page.url)
    assert not page.errors, page.errors


def test_a_link_opens_at_its_step_and_the_map_is_the_contents(page, site_url):
    silent_socket(page)
    run = example(0)
    page.goto(site_url + "/#step=3")
    bar_at(page, 3)
    shows(page, "he-kv", "data-kv-bytes", run["steps"][2]["kv"]["bytes"])
    pipeline = page.locator("he-pipeline")
    expect(pipeline.locator("a[href='#tokens'] .he-fig")).to_have_text(f"{len(run['prefill']['tokens'])} tokens")
    expect(pipeline.locator("a[href='#dice'] .he-fig")).to_have_text(f"p = {run['steps'][2]['token']['prob']:.2f}")
    expect(pipeline).to_have_attribute("data-reached", "stream")  # step 3 of a finished run: the loop's last stage
    pipeline.locator("a[href='#kv']").click()
    expect(pipeline).to_have_attribute("data-in-view", "kv")
    expect(pipeline.locator("a[href='#kv']")).to_have_attribute("aria-current", "location")
    assert not page.errors, page.errors


def test_clicking_a_candidate_forks(page, site_url):
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, text="What does mole mean?", max_new_tokens=6)
    assert not run["error"], run["error"]
    steps = run["step"]
    assert len(steps) >= 3
    bar_at(page, len(steps))  # a finished run stays on its last step (issue 23)
    expect(page.locator(".run-word[data-word='2']").first).to_have_text("mean")  # the prose uses the visitor's words
    page.locator("#replay-range").fill("2")
    logits = page.locator("he-logits")
    logits.scroll_into_view_if_needed()
    candidate = logits.locator("button.he-fork").first
    expect(candidate).to_be_visible()
    token = int(candidate.get_attribute("data-token-id"))
    assert token != steps[1]["token"]["id"]
    candidate.click()
    expect(page.locator("#btn-original")).to_be_visible(timeout=15_000)
    for _ in range(120):
        forced = [f for f in frames if f.get("type") == "step" and f.get("forced")]
        if forced:
            break
        page.wait_for_timeout(250)
    assert forced and forced[0]["step"] == 2 and forced[0]["token"]["id"] == token
    at = frames.index(forced[0])
    for _ in range(240):  # the page resumes the branch: it runs on to its own `done`
        if any(f.get("type") == "done" for f in frames[at:]):
            break
        page.wait_for_timeout(250)
    else:
        raise AssertionError(f"the branch did not finish: {[f.get('type') for f in frames[at:]]}")
    expect(page.locator("#status-banner")).to_contain_text("Finished", timeout=15_000)
    shows(page, "he-sequence", "data-fork-step", 2)
    expect(page.locator("he-sequence .he-fork-mark")).to_have_count(1)
    page.locator("#btn-original").click()
    expect(page.locator("#btn-original")).to_be_hidden()
    page.locator("he-sequence").scroll_into_view_if_needed()
    expect(page.locator("he-sequence")).not_to_have_attribute("data-fork-step", "2")
    assert not page.errors, page.errors


def test_a_permalink_fills_the_form_and_runs_live(page, site_url):
    url, payloads = record(site_url)
    page.goto(site_url + url)
    expect(page.locator("#messages textarea").first).to_have_value(MESSAGES[0]["content"])
    expect(page.locator("input[name=seed]")).to_have_value("3")
    expect(page.locator("input[name=max_new_tokens]")).to_have_value("8")
    live = page.locator("#run-live")
    expect(live).to_be_visible()
    frames = collect_frames(page)
    live.click()
    expect(page.locator("#messages textarea").first).to_have_value(MESSAGES[0]["content"])
    expect(page.locator("#status-banner")).to_contain_text("Finished", timeout=60_000)
    prefill = next(f for f in frames if f.get("type") == "prefill")
    assert MESSAGES[0]["content"] in prefill["template"]["text"]
    session = next(f for f in frames if f.get("type") == "session")
    assert session["params"]["seed"] == 3 and session["params"]["max_new_tokens"] == 8
    expect(page.locator("#example-bar")).to_be_visible()  # the examples picker stays after a live run
    assert len(INDEX) >= 1
    assert not page.errors, page.errors


def test_a_step_attribute_pins_one_diagram(page, site_url):
    """An author's `step` attribute pins a diagram; the others keep following the page's step bar."""
    silent_socket(page)
    run = example(0)
    page.goto(site_url + "/")
    bar_at(page, 1)
    page.locator("he-dice").evaluate("node => node.setAttribute('step', '3')")
    shows(page, "he-dice", "data-step", 3)
    shows(page, "he-dice", "data-u", run["steps"][2]["draw"]["u"] if run["steps"][2]["draw"] else "greedy")
    shows(page, "he-logits", "data-step", 1)
    assert not page.errors, page.errors
