"""Embeds an author can trust (issue 17, items 3-5): choose what to show, work without the server, no layout jumps.

Most pages here are served by a plain http.server from a copy of static/ and a recording: no Django at all."""
import functools
import http.server
import json
import math
import re
import shutil
import threading
import urllib.request

import pytest

from inference.wire.packing import unpack
from tests.browser.conftest import ROOT
from tests.browser.test_embed import console_errors, recording  # noqa: F401 (fixtures)

DRIVER = (ROOT / "static/js/embed-driver.js").read_text()
SECTIONS = re.findall(r'"([a-z]+)"', re.search(r"export const SECTIONS = \[(.*?)\];", DRIVER, re.S).group(1))
NOTHING = "Nothing to show: give this element run=, example=, src= or prompt= (docs/embedding.md)"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def blog(tmp_path):
    """An author's site with no Hit Enter server: a copy of static/ under /he/static/; publish(name, text) -> URL."""
    shutil.copytree(ROOT / "static", tmp_path / "he" / "static")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"

    def publish(name: str, text: str) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return f"{base}/{name}"

    publish.base = base
    yield publish
    server.shutdown()
    server.server_close()


def page_html(body: str, head: str = "", script: str = "/he/static/js/embed.js") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>A blog post</title>{head}'
            f'<script type="module" src="{script}"></script></head><body><h1>My post</h1>{body}</body></html>')


def example(name: str) -> dict:
    return json.loads((ROOT / "static/examples" / f"{name}.json").read_text())


def live_lens(recording: dict) -> str:
    """The recording as a live SmolLM2 run sends it (the lens of the last layer only; the examples have every
    layer), as JSON safe inside a <script> element."""
    trimmed = json.loads(json.dumps(recording))
    for p in trimmed["payloads"]:
        if p["type"] in ("prefill", "step"):
            p["lens"] = p["lens"][-1:]
    return json.dumps(trimmed).replace("</", "<\\/")


def steps_of(recording: dict) -> list[dict]:
    return [p for p in recording["payloads"] if p["type"] == "step"]


def entropy(step: dict) -> float:
    """docs/embedding.md's max-entropy: −Σ p ln p over the step's probs, the rest as tokens no likelier than the last."""
    probs = [p["prob"] for p in step["probs"] if p["prob"] > 0]
    rest = max(0.0, 1 - sum(probs))
    return -sum(p * math.log(p) for p in probs) + (rest * math.log(1 / min(probs)) if rest > 1e-9 else 0.0)


def shown(locator) -> str:
    """The text a diagram shows, in its shadow root or in itself."""
    return locator.evaluate("e => (e.shadowRoot ?? e).textContent")


def no_requests_to(page, url: str) -> list:
    seen = []
    page.on("request", lambda request: seen.append(request.url) if request.url.startswith(url) else None)
    return seen


# ---- step ------------------------------------------------------------------------------------

def test_step_picks_a_number_first_last_and_max_entropy(page, blog):
    hot = steps_of(example("hot"))
    entropies = [entropy(s) for s in hot]
    most = entropies.index(max(entropies)) + 1
    assert most not in (1, len(hot))  # the recording tells max-entropy apart from first and last
    # The distribution's visible head alone would pick another step: the rest of the mass counts.
    assert max(range(len(hot)), key=lambda i: -sum(p["prob"] * math.log(p["prob"]) for p in hot[i]["probs"])) + 1 != most
    chosen = {"2": 2, "first": 1, "last": len(hot), "max-entropy": most, "99": len(hot), "0": 0}
    body = "".join(f'<he-logits example="hot" step="{attr}" id="s-{attr}"></he-logits>' for attr in chosen)
    page.goto(blog("step.html", page_html(body)))
    for attr, step in chosen.items():
        logits = page.locator(f"#s-{attr}")
        logits.and_(page.locator("[data-top-id]")).wait_for(timeout=20_000)
        assert logits.get_attribute("data-step") == str(step), attr
        prefill = next(p for p in example("hot")["payloads"] if p["type"] == "prefill")
        top = (hot[step - 1] if step else prefill)["logits"]["top"][0]["id"]
        assert logits.get_attribute("data-top-id") == str(top), attr
    # The scrubber above shows the chosen step and moves it with the keyboard.
    scrubber = page.locator("#s-2 .he-controls-above .he-embed-scrubber")  # inside the element's shadow root
    assert scrubber.locator("output").inner_text() == f"step 2 of {len(hot)}"
    scrubber.get_by_role("slider", name="Step").press("ArrowRight")
    page.wait_for_function("() => document.querySelector('#s-2').dataset.step === '3'")
    assert page.get_attribute("#s-2", "data-top-id") == str(hot[2]["logits"]["top"][0]["id"])
    assert page.get_attribute("#s-2", "step") == "3"


def test_dice_and_stages_show_the_chosen_step(page, blog):
    greedy = steps_of(example("greedy"))
    most = max(range(len(greedy)), key=lambda i: entropy(greedy[i])) + 1
    page.goto(blog("dice.html", page_html('<he-dice example="greedy" step="2"></he-dice>'
                                         '<he-stages example="greedy" step="max-entropy"></he-stages>')))
    page.wait_for_selector("he-stages[data-stage-count]", timeout=20_000)
    page.wait_for_selector("he-dice[data-rendered]", timeout=20_000)
    assert page.get_attribute("he-dice", "data-step") == "2"
    assert greedy[1]["token"]["text"].replace(" ", "\u2423") in shown(page.locator("he-dice"))
    assert page.get_attribute("he-stages", "data-step") == str(most)


# ---- layer and head --------------------------------------------------------------------------

def test_layer_and_head_pick_the_attention_matrix_and_the_lens_row(page, blog):
    hot = example("hot")
    prefill = next(p for p in hot["payloads"] if p["type"] == "prefill")
    blocks = unpack(prefill["attention"]["blocks"])  # (layers, heads, B, B): this recording is summarised
    layer, head = 5, 3  # as labelled: "layer 5" is the fifth block (index 4), heads from 0
    weights = blocks[layer - 1, head]
    step2 = steps_of(hot)[1]
    lens_row = next(r for r in step2["lens"])
    body = (f'<he-attention example="hot" layer="{layer}" head="{head}"></he-attention>'
            f'<he-layers example="hot" step="2" layer="{lens_row["layer"] + 1}" id="read"></he-layers>'
            f'<he-layers src="#live-lens" step="2" layer="3" id="unread"></he-layers>'
            f'<script type="application/json" id="live-lens">{live_lens(hot)}</script>')
    page.goto(blog("layers.html", page_html(body)))
    page.wait_for_selector("he-attention[data-layers]", timeout=20_000)
    attention = page.locator("he-attention")
    assert (attention.get_attribute("data-layer"), attention.get_attribute("data-head")) == (str(layer), str(head))
    assert attention.get_by_role("combobox", name="Layer").input_value() == str(layer - 1)
    assert attention.get_by_role("combobox", name="Head").input_value() == str(head)
    caption = attention.locator(".he-part").first.inner_text()
    assert f"layer {layer}, head {head}" in caption
    assert f"largest weight, {weights[-1].max():.3f}" in caption
    assert f"largest weight here, {weights.max():.3f}" in caption
    # The visitor's menu still works, until the author's attribute changes again.
    attention.get_by_role("combobox", name="Head").select_option("0")
    page.wait_for_function("() => document.querySelector('he-attention').dataset.head === '0'")
    page.eval_on_selector("he-attention", "e => e.setAttribute('head', '7')")
    page.wait_for_function("() => document.querySelector('he-attention').dataset.head === '7'")

    page.wait_for_selector("#read .he-lens-chosen", timeout=20_000)
    said = page.inner_text("#read .he-lens-chosen")
    assert said == (f"Layer {lens_row['layer'] + 1} (L{lens_row['layer'] + 1}): top guess "
                    f"{json.dumps(lens_row['texts'][0], ensure_ascii=False)} at {lens_row['probs'][0]:.3f}.")
    assert page.inner_text("#read tr.selected th") == f"L{lens_row['layer'] + 1}"
    assert page.inner_text("#unread .he-lens-chosen") == "Layer 3 (L3) was not read at this position."


# ---- controls and caption --------------------------------------------------------------------

def test_controls_and_caption(page, blog):
    body = ('<he-attention example="biopsy" step="2" controls="none" caption="off" id="none"></he-attention>'
            '<he-attention example="biopsy" step="2" controls="scrubber" id="scrub"></he-attention>'
            '<he-attention example="biopsy" step="2" id="full"></he-attention>'
            '<he-tokens example="biopsy" id="tokens"></he-tokens>')
    page.goto(blog("controls.html", page_html(body)))
    for name in ("none", "scrub", "full"):
        page.wait_for_selector(f"#{name}[data-layers]", timeout=20_000)

    def visible(selector: str) -> int:
        return sum(1 for i in range(page.locator(selector).count()) if page.locator(selector).nth(i).is_visible())

    # The diagram's own menus and buttons (its body); the embed's scrubber and export buttons sit around it.
    assert visible("#none select, #none button") == 0
    assert visible("#scrub .he-body select, #scrub .he-body button") == 0
    assert visible("#full .he-body select") == 2
    assert visible("#scrub .he-export-bar button") == 4 and visible("#full .he-export-bar button") == 4  # SVG, PNG, embed code, data
    # In each element's shadow root: the scrubber above the diagram, the caption last below it.
    above = "he-controls-above > .he-embed-scrubber"
    below = "he-controls-below > .he-embed-caption:last-child"
    assert page.locator(f"#none .{above}").count() == 0 and page.locator(f"#none .{below}").count() == 0
    assert page.locator(f"#scrub .{above}").count() == 1 and page.locator(f"#full .{above}").count() == 1
    assert page.locator(f"#tokens .{above}").count() == 0  # not stepped
    for name in ("scrub", "full", "tokens"):
        assert page.locator(f"#{name} .{below}").count() == 1
    assert page.evaluate("document.querySelectorAll('.he-embed-scrubber, .he-embed-caption, .he-export-bar').length") == 0
    # Back to full: the controls come back.
    page.eval_on_selector("#none", "e => e.setAttribute('controls', 'full')")
    page.wait_for_function("""() => { const e = document.querySelector('#none'), menus = (e.shadowRoot ?? e).querySelectorAll('select');
        return menus.length === 2 && [...menus].every((s) => s.checkVisibility()); }""")


def test_iframe_takes_the_same_choices(page, site_url, recording, blog):
    run_id, payloads = recording
    steps = [p for p in payloads if p["type"] == "step"]
    src = f"{site_url}/embed/logits/?run={run_id}&step=2&controls=none&caption=off"
    page.goto(blog("iframe.html", page_html(f'<iframe data-he-embed src="{src}"></iframe>', script=f"{site_url}/static/js/embed.js")))
    frame = page.frame_locator("iframe")
    frame.locator("he-logits[data-top-id]").wait_for(timeout=20_000)
    assert frame.locator("he-logits").get_attribute("data-step") == "2"
    assert frame.locator("he-logits").get_attribute("data-top-id") == str(steps[1]["logits"]["top"][0]["id"])
    assert frame.locator(".he-embed-caption, .he-embed-scrubber").count() == 0


# ---- before data -----------------------------------------------------------------------------

def test_attributes_show_before_any_run_and_nothing_to_show_is_said(page, blog):
    body = ('<he-stages prompt="Why is the sky blue?" temperature="0.7"></he-stages>'
            '<he-logits></he-logits><he-dice id="later"></he-dice>')
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(blog("before.html", page_html(body)))
    page.wait_for_selector("he-stages[data-rendered]", timeout=20_000)
    temperature = page.locator("he-stages").get_by_role("slider", name="temperature")
    assert temperature.input_value() == "0.7"
    assert "Temperature0.70" in "".join(shown(page.locator("he-stages")).split())
    assert sockets == []  # nothing ran: no Play, no autostart
    line = page.locator("he-logits .he-controls-below p")  # inside its shadow root
    assert line.inner_text() == NOTHING and line.is_visible()
    assert page.locator("he-logits").get_attribute("data-rendered") is None
    # Naming a recording later draws it, and the line goes.
    assert page.inner_text("#later .he-controls-below p") == NOTHING
    page.eval_on_selector("#later", "e => e.setAttribute('example', 'biopsy')")
    page.wait_for_selector("#later[data-rendered]", timeout=20_000)
    assert page.locator("#later .he-controls-below p").get_attribute("data-state") != "empty"
    assert page.locator("p[data-state=empty]").count() == 1


# ---- without the server ----------------------------------------------------------------------

def test_static_copy_and_a_recording_replay_with_no_server(page, site_url, recording, blog):
    """static/ copied to the blog, a recording saved from the site beside it: the site is never asked."""
    run_id, payloads = recording
    with urllib.request.urlopen(f"{site_url}/api/runs/{run_id}") as response:
        saved = json.load(response)
    blog("runs/saved.json", json.dumps(saved))
    blog("runs/hot.json", (ROOT / "static/examples/hot.json").read_text())
    steps = [p for p in payloads if p["type"] == "step"]
    body = ('<he-logits src="runs/saved.json" step="2"><p class="fallback">The scores diagram.</p></he-logits>'
            '<he-dice src="runs/hot.json" step="last" article-href="https://blog.example/sampling"></he-dice>'
            '<he-tokens src="runs/not-a-run.json"><p class="fallback">Tokens: see the article.</p></he-tokens>')
    blog("runs/not-a-run.json", json.dumps({"hello": "world"}))
    asked = no_requests_to(page, site_url)
    page.goto(blog("post.html", page_html(body)))
    page.wait_for_selector("he-logits[data-top-id]", timeout=20_000)
    assert page.get_attribute("he-logits", "data-step") == "2"
    assert page.get_attribute("he-logits", "data-top-id") == str(steps[1]["logits"]["top"][0]["id"])
    assert page.locator("he-logits .fallback").is_hidden()  # the data took the fallback's place (it is no longer slotted)
    # The full-article link: the recording's own replay page on the site, or the author's article-href.
    assert page.get_attribute("he-logits .he-embed-caption a", "href") == f"{site_url}/runs/{run_id}#logits"
    page.wait_for_selector("he-dice[data-rendered]", timeout=20_000)
    assert page.get_attribute("he-dice .he-embed-caption a", "href") == "https://blog.example/sampling"
    assert page.get_attribute("he-dice", "data-step") == str(len(steps_of(example("hot"))))
    # A recording that cannot be had: the author's fallback alone (docs/embedding.md); the hidden caption keeps why.
    page.wait_for_selector("he-tokens .he-embed-caption[data-state=error]", state="attached", timeout=20_000)
    assert page.locator("he-tokens .fallback").is_visible()
    assert page.locator("he-tokens .he-embed-caption").is_hidden()
    assert "it is not a recording" in page.locator("he-tokens .he-embed-caption").text_content()
    assert asked == []


def test_saved_static_iframe_page_works_with_no_server(page, site_url, recording, blog):
    run_id, payloads = recording
    steps = [p for p in payloads if p["type"] == "step"]
    with urllib.request.urlopen(f"{site_url}/embed/dice/static/?run={run_id}&step=2&assets=he/static/") as response:
        blog("dice.html", response.read().decode())
    asked = no_requests_to(page, site_url)
    page.goto(blog("post.html", page_html('<iframe data-he-embed src="dice.html"></iframe>')))
    frame = page.frame_locator("iframe")
    frame.locator("he-dice[data-rendered]").wait_for(timeout=20_000)
    assert frame.locator("he-dice").get_attribute("data-step") == "2"
    assert steps[1]["token"]["text"].replace(" ", "\u2423") in shown(frame.locator("he-dice"))
    assert frame.locator(".he-embed-caption").get_attribute("data-state") == "replay"
    assert frame.get_by_role("link", name="Hit Enter — full article").get_attribute("href") == f"{site_url}/runs/{run_id}#dice"
    page.wait_for_function("() => document.querySelector('iframe').clientHeight > 300", timeout=15_000)
    assert asked == []


def test_choose_module_against_python(page, blog):
    """lib/choose.js's entropy of every recorded step matches Python's; its words and edge cases resolve as documented."""
    page.goto(blog("empty.html", page_html("")))
    for name in ("biopsy", "greedy", "hot"):
        steps = steps_of(example(name))
        got = page.evaluate("""async (steps) => { const m = await import('/he/static/js/lib/choose.js');
            return { h: steps.map(m.stepEntropy), most: m.resolveStep('max-entropy', steps) }; }""", steps)
        assert got["h"] == pytest.approx([entropy(s) for s in steps], rel=1e-12)
        assert got["most"] == max(range(len(steps)), key=lambda i: entropy(steps[i])) + 1
    cases = page.evaluate("""async () => { const m = await import('/he/static/js/lib/choose.js'); const s = [{}, {}, {}];
        return [m.resolveStep('first', []), m.resolveStep('last', []), m.resolveStep('max-entropy', []), m.resolveStep(' LAST ', s),
                m.resolveStep('-4', s), m.resolveStep('2.9', s), m.resolveStep('soon', s), m.resolveStep(null, s),
                m.resolveIndex('1', 30, 1), m.resolveIndex('99', 30, 1), m.resolveIndex('0', 9), m.resolveIndex('x', 9),
                m.controlsOf('NONE'), m.controlsOf('bogus'), m.captionOn('off'), m.captionOn(null)]; }""")
    assert cases == [0, 0, 0, 3, 0, 2, None, None, 0, 29, 0, None, "none", "full", False, True]
