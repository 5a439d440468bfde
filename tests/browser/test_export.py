"""Export in Chromium: "Download SVG", "Download PNG" and "Copy embed code" under the diagrams, on the article and in embeds."""
import base64
import json
import os
import re
import struct
import urllib.request
import xml.etree.ElementTree as ET
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_embed import author_page, html, recording  # noqa: F401  (fixtures)

SVG = "{http://www.w3.org/2000/svg}"
SECTIONS = ["template", "tokens", "embeddings", "positions", "mask", "attention", "layers", "logits", "stages", "filter",
            "dice", "sequence", "kv", "stream", "stop", "context", "myths", "timeline", "kvcalc", "batch", "speculative", "quant"]
STEP = 2


def unpack(packed: dict) -> np.ndarray:
    """A payload's packed float16 array (docs/protocol.md), as the page decodes it."""
    return np.frombuffer(base64.b64decode(packed["b64"]), dtype="<f2").astype(np.float32).reshape(packed["shape"])


def bar(scope, element: str):
    """The export bar of the diagram `element` (under the diagram, inside its shadow root: locators pierce it)."""
    return scope.locator(f'.he-export-bar[data-for="{element}"]')


def download(page, scope, element: str, kind: str) -> bytes:
    """Click the bar's button for `kind` (svg, png) and return the downloaded file's bytes."""
    button = bar(scope, element).locator(f"button[data-export={kind}]")
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=20_000) as info:
        button.click()
    path = info.value.path()
    with open(path, "rb") as file:
        return file.read()


def svg_of(page, scope, element: str) -> tuple[ET.Element, list[str]]:
    """The downloaded SVG, parsed as XML (it must parse), and the text of its <text> nodes."""
    data = download(page, scope, element, "svg")
    if os.environ.get("EXPORT_KEEP"):  # look at them: EXPORT_KEEP=/tmp/dir
        (Path(os.environ["EXPORT_KEEP"]) / f"{element}.svg").write_bytes(data)
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg" and float(root.get("width")) > 100 and float(root.get("height")) > 50
    return root, ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# The focused node, inside shadow roots (document.activeElement is the element whose shadow root holds it).
FOCUSED = "(() => { let a = document.activeElement; while (a?.shadowRoot?.activeElement) a = a.shadowRoot.activeElement; return a; })()"


def copied(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def as_written(x, digits: int) -> str:
    """x with `digits` decimals as the page writes it (lib/i18n.js decimal, Intl.NumberFormat): the shortest decimal
    that reads back as x, rounded half away from zero. Python's format and toFixed round the binary value instead, and
    differ at ties: a logit of 6.685 (sent with 3 decimals) reads 6.69 on the page, 6.68 in f"{x:.2f}"."""
    exact = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{exact:.{digits}f}"


def check_logits(page, scope, element_step: dict) -> None:
    """The logits SVG holds the step's top candidates: their token ids and raw logits, as drawn."""
    root, texts = svg_of(page, scope, "he-logits")
    joined = "\n".join(texts)
    for candidate in element_step["logits"]["top"][:3]:
        assert str(candidate["id"]) in texts, (candidate, texts[:40])
        assert f"{as_written(candidate['logit'], 2)} · " in joined, (candidate, joined[:2000])
    assert len(list(root.iter(f"{SVG}rect"))) > 10  # the bars and chips are boxes, not a picture


def check_embeddings(page, scope, prefill: dict) -> None:
    """An HTML table (div rows) as SVG: every row's norm as text, every colour cell as a rect."""
    root, texts = svg_of(page, scope, "he-embeddings")
    norms = unpack(prefill["embeddings"]["norms"])
    for norm in norms:
        assert as_written(norm, 2) in texts, (norm, texts)
    rows, dims = prefill["embeddings"]["slice"]["shape"]
    assert len(list(root.iter(f"{SVG}rect"))) >= rows * dims


def check_attention(page, scope, prefill: dict) -> None:
    """The heatmap: the largest weight of the drawn layer and head (the default head: a rule picks it) in its
    caption, the strongest colour on a cell."""
    root, texts = svg_of(page, scope, "he-attention")
    attention = prefill["attention"]
    assert attention["mode"] == "full", attention["mode"]
    drawn = scope.locator("he-attention")
    layer, head = int(drawn.get_attribute("data-layer")) - 1, int(drawn.get_attribute("data-head"))  # as labelled
    full = unpack(attention["full"])[layer, head]  # [query, key]
    largest = max(full[r, c] for r in range(full.shape[0]) for c in range(r + 1))
    assert f"largest weight here, {as_written(largest, 3)}" in " ".join(texts), texts  # a caption wraps over lines
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect")]
    assert "rgb(55, 105, 195)" in fills  # heat(1): the cell holding that weight
    cells = full.shape[0] * full.shape[1]
    assert len(fills) >= cells
    for token in prefill["tokens"]:  # model text with markup characters ("<|user|>") stays text, escaped
        assert token["text"].replace(" ", "␣").replace("\n", "↵") in texts, (token, texts)


def test_article_replay_exports_svg_png_and_embed_code(page, site_url, recording, author_page):  # noqa: F811
    run_id, payloads = recording
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    refused = []  # the site's own CSP applies (no bypass): the PNG's data: image and the blob: downloads pass it
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None)
    page.goto(f"{site_url}/runs/{run_id}#step={STEP}")
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(STEP))
    for element, name in (("he-logits", "data-top-id"), ("he-embeddings", "data-rows"), ("he-attention", "data-heads")):
        page.locator(element).scroll_into_view_if_needed()
        page.wait_for_selector(f"{element}[{name}]", state="attached", timeout=20_000)
    expect(page.locator("he-logits")).to_have_attribute("data-step", str(STEP))

    check_logits(page, page, steps[STEP - 1])
    check_embeddings(page, page, prefill)
    check_attention(page, page, prefill)

    # PNG: the same view drawn at devicePixelRatio 2.
    png = download(page, page, "he-logits", "png")
    width, height = png_size(png)
    box = page.locator("he-logits .he-figure").bounding_box()  # the diagram, without the buttons under it
    assert abs(width - 2 * box["width"]) <= 2 and abs(height - 2 * box["height"]) <= 2
    assert height < 2 * page.locator("he-logits").bounding_box()["height"] - 40
    assert len(png) > 5_000
    assert refused == [], refused

    # Copy embed code: the recording, pinned at the step on show; pasted into an author's page it shows that step.
    bar(page, "he-logits").locator("button[data-export=embed]").click()
    expect(bar(page, "he-logits").locator(".he-export-status")).to_have_text("Embed code copied.")
    snippet = copied(page)
    assert f'<he-logits run="{run_id}" step="{STEP}"></he-logits>' in snippet, snippet
    assert f'<script type="module" src="{site_url}/static/js/embed.js"></script>' in snippet
    page.goto(author_page("pasted.html", html(site_url, "").replace(
        f'<script type="module" src="{site_url}/static/js/embed.js"></script>', "").replace("</body>", snippet + "</body>")))
    page.wait_for_selector("he-logits[data-top-id]", timeout=20_000)
    assert page.get_attribute("he-logits", "run") == run_id
    assert page.get_attribute("he-logits", "data-step") == str(STEP)
    assert page.get_attribute("he-logits", "data-top-id") == str(steps[STEP - 1]["logits"]["top"][0]["id"])
    assert not page.errors, page.errors


def test_every_section_of_the_article_exports_a_parsing_svg(page, site_url, recording):  # noqa: F811
    """All 22 sections: each has the three buttons and its SVG parses, with text for its words and ids."""
    run_id, payloads = recording
    prefill = next(p for p in payloads if p["type"] == "prefill")
    page.goto(f"{site_url}/runs/{run_id}#step={STEP}")
    for section in SECTIONS:
        element = f"he-{section}"
        page.locator(element).first.scroll_into_view_if_needed()
        page.wait_for_selector(f"{element}[data-rendered]", state="attached", timeout=20_000)
        expect(bar(page, element).locator("button")).to_have_count(3)
        _, texts = svg_of(page, page, element)
        assert texts, element
        if section == "tokens":
            rest = iter(texts)  # every token id, in order, among the texts
            assert all(str(t["id"]) in rest for t in prefill["tokens"]), texts
    assert not page.errors, page.errors


def test_article_buttons_are_reachable_by_tab_with_visible_focus(page, site_url, recording):  # noqa: F811
    run_id, _ = recording
    page.goto(f"{site_url}/runs/{run_id}")
    logits = bar(page, "he-logits").locator("button")
    expect(logits).to_have_count(3)  # in the diagram's shadow root, once its element is defined
    assert logits.all_inner_texts() == ["Download SVG", "Download PNG", "Copy embed code"]
    # From the previous diagram's bar, Tab walks through whatever lies between and reaches these buttons.
    start = bar(page, "he-layers").locator("button[data-export=embed]")
    start.focus()
    for _ in range(300):
        page.keyboard.press("Tab")
        if page.evaluate(f"(() => {{ const a = {FOCUSED}; return a?.dataset?.export === 'svg' && a.parentElement.dataset.for }})()"):
            break
    assert page.evaluate(f"{FOCUSED}.parentElement.dataset.for") == "he-logits"
    for kind in ("svg", "png", "embed"):
        button = logits.locator(f"xpath=self::*[@data-export='{kind}']")
        expect(button).to_be_focused()
        assert button.evaluate("b => getComputedStyle(b).outlineStyle") != "none"  # the focus is visible
        page.keyboard.press("Tab")
    assert not page.errors, page.errors


def test_copy_embed_code_saves_a_live_run_first(page, site_url, author_page):  # noqa: F811
    frames = collect_frames(page)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    run = run_prompt(page, site_url, frames, max_new_tokens=5)
    steps = run["step"]
    expect(page.locator("#replay-bar")).to_have_attribute("data-position", str(len(steps)))  # a finished run stays on its last step
    page.locator("he-logits").scroll_into_view_if_needed()
    expect(page.locator("he-logits")).to_have_attribute("data-step", str(len(steps)))
    bar(page, "he-logits").locator("button[data-export=embed]").click()
    expect(bar(page, "he-logits").locator(".he-export-status")).to_have_text("Embed code copied.")
    snippet = copied(page)
    run_id = re.search(r'<he-logits run="([^"]+)" step="(\d+)"></he-logits>', snippet)
    assert run_id and run_id.group(2) == str(len(steps)), snippet
    with urllib.request.urlopen(f"{site_url}/api/runs/{run_id.group(1)}") as response:  # saved on the way
        saved = json.loads(response.read())
    assert [p["logits"]["top"][0]["id"] for p in saved["payloads"] if p["type"] == "step"] == \
        [s["logits"]["top"][0]["id"] for s in steps]
    expect(page.locator("#permalink")).to_have_attribute("href", f"/runs/{run_id.group(1)}")
    check_logits(page, page, steps[-1])  # a live run's view exports too
    assert not page.errors, page.errors


def test_embeds_export_svg_and_copy_the_current_view(page, site_url, recording, author_page):  # noqa: F811
    run_id, payloads = recording
    prefill = next(p for p in payloads if p["type"] == "prefill")
    steps = [p for p in payloads if p["type"] == "step"]
    body = (f'<he-attention run="{run_id}" step="{STEP}" theme="light"></he-attention><he-embeddings run="{run_id}"></he-embeddings>'
            f'<iframe data-he-embed src="{site_url}/embed/logits/?run={run_id}&step={STEP}"></iframe>')
    url = author_page("exports.html", html(site_url, body))
    origin = url.split("/exports.html")[0]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    page.goto(url)
    page.wait_for_selector("he-attention[data-heads]", timeout=20_000)
    check_attention(page, page, prefill)
    page.locator("he-embeddings").scroll_into_view_if_needed()
    page.wait_for_selector("he-embeddings[data-rows]", timeout=20_000)
    check_embeddings(page, page, prefill)

    # In the iframe: the buttons are there, and the SVG downloads from inside the frame.
    frame = page.frame_locator("iframe[data-he-embed]")
    page.locator("iframe[data-he-embed]").scroll_into_view_if_needed()  # a diagram draws once it is on screen
    frame.locator("he-logits[data-top-id]").wait_for(timeout=20_000)
    expect(bar(frame, "he-logits").locator("button")).to_have_count(4)  # a replay's embed: its data too
    assert bar(frame, "he-logits").locator("button").all_inner_texts() == ["Download SVG", "Download PNG",
                                                                            "Copy embed code", "Download data"]
    shown = int(frame.locator("he-logits").get_attribute("data-step"))
    check_logits(page, frame, steps[shown - 1 if shown else 0])
    # Its embed code is an iframe's; a framed page may not write the clipboard (no allow="clipboard-write"),
    # and then the code is shown selected for Ctrl+C instead.
    bar(frame, "he-logits").locator("button[data-export=embed]").click()
    status = bar(frame, "he-logits").locator(".he-export-status")
    expect(status).not_to_be_empty()
    framed = copied(page) if status.inner_text() == "Embed code copied." else \
        bar(frame, "he-logits").locator("textarea").input_value()
    assert f'<iframe data-he-embed src="{site_url}/embed/logits/?run={run_id}&amp;step={shown}"' in framed, framed

    # Copy embed code from the element: the same recording, step, layer and head (a head picked in the diagram).
    if prefill["attention"]["heads"] > 1:
        page.locator("he-attention select[aria-label=Head]").select_option("1")
    head = page.locator("he-attention select[aria-label=Head]").input_value()
    bar(page, "he-attention").locator("button[data-export=embed]").click()
    expect(bar(page, "he-attention").locator(".he-export-status")).to_have_text("Embed code copied.")
    snippet = copied(page)
    tag = re.search(r"<he-attention ([^>]*)></he-attention>", snippet)
    assert tag, snippet
    attributes = dict(re.findall(r'(\w+)="([^"]*)"', tag.group(1)))
    assert attributes["run"] == run_id and attributes["step"] == str(STEP)
    layer = page.get_attribute("he-attention", "data-layer")  # the default head's layer (a rule picks it), as labelled
    assert attributes["layer"] == layer and attributes["head"] == head  # layers as labelled, from 1; heads from 0
    assert attributes["theme"] == "light"  # the author's presentation choices travel with it
    page.goto(author_page("pasted-attention.html", html(site_url, "").replace(
        f'<script type="module" src="{site_url}/static/js/embed.js"></script>', "").replace("</body>", snippet + "</body>")))
    page.wait_for_selector("he-attention[data-heads]", timeout=20_000)
    assert page.get_attribute("he-attention", "data-step") == str(STEP)
    assert page.get_attribute("he-attention", "run") == run_id
    assert not page.errors, page.errors


def test_a_finished_live_embed_copies_a_live_snippet_with_its_seed(page, site_url, author_page):  # noqa: F811
    """A page on another origin cannot save the run: its code is the same prompt and parameters, with the seed it ran on."""
    prompt = 'Say "hi" <b>now</b> & then'
    body = f'<he-logits prompt="{prompt.replace(chr(34), "&quot;").replace("<", "&lt;")}" max_new_tokens="3" temperature="0.8" autostart></he-logits>'
    url = author_page("live.html", html(site_url, body))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url.rsplit("/", 1)[0])
    frames = collect_frames(page)
    page.goto(url)
    page.wait_for_selector("he-logits .he-embed-caption[data-state=finished]", timeout=90_000)
    page.wait_for_selector("he-logits[data-top-id]", timeout=20_000)
    seed = next(f for f in frames if f["type"] == "session")["params"]["seed"]
    bar(page, "he-logits").locator("button[data-export=embed]").click()
    expect(bar(page, "he-logits").locator(".he-export-status")).to_have_text("Embed code copied.")
    snippet = copied(page)
    # Pasted into a fresh page, the browser parses it back to the same attributes (the prompt's markup stays text).
    page.goto(author_page("live-pasted.html", "<!DOCTYPE html><title>t</title>" + snippet.split("\n", 1)[1].replace(" autostart", "")))
    attributes = page.eval_on_selector("he-logits", "e => Object.fromEntries([...e.attributes].map((a) => [a.name, a.value]))")
    assert attributes == {"prompt": prompt, "max_new_tokens": "3", "temperature": "0.8", "seed": str(seed),
                          "step": str(sum(f["type"] == "step" for f in frames))}, attributes
    assert "autostart" in snippet and page.locator("he-logits b").count() == 0


SHADOW_DIAGRAM = """async (src) => {
  const { diagramToSvg } = await import(src);
  class Fake extends HTMLElement {
    constructor() {
      super();
      const root = this.attachShadow({ mode: "open" });
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(`td { border: 1px solid rgb(200, 0, 0); background: rgb(0, 128, 0); color: rgb(1, 2, 3);
        font: 14px monospace; padding: 4px } circle { fill: rgb(9, 9, 9) }`);
      root.adoptedStyleSheets = [sheet];
      const table = document.createElement("table");
      for (const row of [["</text><script>alert(1)</script>", "0.123"], ["id 42", "9.87"]]) {
        const tr = table.insertRow();
        for (const value of row) tr.insertCell().textContent = value;
      }
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("width", "20"); svg.setAttribute("height", "20");
      const dot = document.createElementNS("http://www.w3.org/2000/svg", "circle");
      dot.setAttribute("cx", "10"); dot.setAttribute("cy", "10"); dot.setAttribute("r", "5");
      svg.append(dot);
      const hidden = document.createElement("span");  // the pattern of .he-sr-only: for screen readers, not the picture
      hidden.style.cssText = "position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%)";
      hidden.textContent = "announced only";
      root.append(table, svg, hidden);
    }
  }
  customElements.define("he-fake", Fake);
  return diagramToSvg(document.querySelector("he-fake")).svg;
}"""


def test_export_walks_an_open_shadow_root_and_keeps_markup_as_text(page, site_url, author_page):  # noqa: F811
    """An element drawn in an open shadow root with its own stylesheet: its table's cells, text and inline SVG export."""
    page.goto(author_page("shadow.html", '<!DOCTYPE html><html lang="en"><title>t</title><body><he-fake></he-fake></body></html>'))
    root = ET.fromstring(page.evaluate(SHADOW_DIAGRAM, f"{site_url}/static/js/lib/export.js").encode())
    texts = {"".join(t.itertext()): t for t in root.iter(f"{SVG}text")}
    assert {"</text><script>alert(1)</script>", "0.123", "id 42", "9.87"} <= set(texts), texts
    assert "announced only" not in texts
    assert texts["9.87"].get("fill") == "rgb(1, 2, 3)" and texts["9.87"].get("font-size") == "14px"
    assert not list(root.iter(f"{SVG}script")) and not list(root.iter("script"))
    cells = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "rgb(0, 128, 0)"]
    assert len(cells) == 4 and all(r.get("stroke") == "rgb(200, 0, 0)" for r in cells)
    assert [c.get("fill") for c in root.iter(f"{SVG}circle")] == ["rgb(9, 9, 9)"]  # inline SVG, with its computed paint
