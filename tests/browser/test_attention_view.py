"""The attention section reads at a glance (issue 23, point 9): a short prompt's full token-labelled matrix on the
head a stated rule picks, masked cells never the colour of weight 0 (both themes), and a long prompt's block
averages under disjoint range labels in a scroll container."""
import re
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.test_article import collect_frames, run_prompt
from tests.browser.test_long_prompt import joined

SENTENCE = "the water of the river is light and the light of the sky is on the water"
SHORT_PROMPT = " ".join([SENTENCE] * 2)  # ~45 bundled tokens: past every-head-in-full, within 64
LONG_PROMPT = " ".join([SENTENCE] * 5)  # ~95 tokens: block averages
RULE = "the head that looks least at the first token"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # screenshots to look at (ignored by git)
FAR = 40  # least RGB distance between any colour of a masked cell's hatch and the 0 swatch

# The prefill matrix's labels, a masked cell's hatch colours and the 0 swatch, read inside the shadow root.
READ = """e => {
  const part = e.shadowRoot.querySelector(".he-part");
  const grid = part.querySelector(".he-matrix");
  const labels = (sel) => [...grid.querySelectorAll(sel)].map((n) => n.textContent);
  const masked = grid.querySelector('.he-cell.masked[data-r="0"][data-c="1"]');
  const rgb = (s) => [...s.matchAll(/rgba?\\(([^)]*)\\)/g)].map((m) => m[1].split(",").slice(0, 3).map(Number));
  const scroll = grid.closest(".he-scroll");
  return { rows: labels(".row-label"), cols: labels(".col-label"), view: part.dataset.view,
    caption: part.querySelector(".he-caption").textContent,
    hatch: masked ? rgb(getComputedStyle(masked).backgroundImage) : null,
    zero: rgb(getComputedStyle(part.querySelector(".he-heat-swatch")).backgroundColor)[0],
    overflow: scroll ? getComputedStyle(scroll).overflowX : null };
}"""


def shown(page, site_url: str, text: str) -> tuple[dict, dict]:
    """Run `text` on the article; the prefill as sent and what <he-attention> draws of it."""
    frames = collect_frames(page)
    run = run_prompt(page, site_url, frames, text=text, max_new_tokens=2)
    assert not run["error"], run["error"]
    prefill = joined(frames, "prefill")
    attention = page.locator("he-attention")
    attention.scroll_into_view_if_needed()
    expect(attention).to_have_attribute("data-layers", str(prefill["attention"]["layers"]), timeout=30_000)
    return prefill, attention.evaluate(READ)


def distance(a, b) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


def check_masked(page, theme: str, name: str) -> None:
    """A masked cell's hatch is far from the 0 swatch in `theme`: the element's attribute, then the page's preference."""
    attention = page.locator("he-attention")
    for how in ("attribute", "preference"):
        if how == "attribute":
            attention.evaluate("(e, t) => e.setAttribute('theme', t)", theme)
        else:
            attention.evaluate("e => e.removeAttribute('theme')")
            page.emulate_media(color_scheme=theme)
        seen = attention.evaluate(READ)
        assert seen["hatch"], f"no masked cell above the diagonal ({theme}, {how})"
        near = [c for c in seen["hatch"] if distance(c, seen["zero"]) < FAR]
        assert not near, f"{theme} ({how}): masked hatch {seen['hatch']} too close to the 0 swatch {seen['zero']}"
        ARTIFACTS.mkdir(exist_ok=True)
        attention.screenshot(path=str(ARTIFACTS / f"attention-{name}-{theme}-{how}.png"))


def ranges(labels: list[str]) -> list[tuple[int, int]]:
    """ "a–b" (inclusive) or "a" as (a, b)."""
    out = []
    for label in labels:
        m = re.fullmatch(r"(\d+)(?:–(\d+))?", label)
        assert m, f"not a token range: {label!r}"
        out.append((int(m[1]), int(m[2] or m[1])))
    return out


def test_a_short_prompt_draws_every_token_on_the_stated_head(page, site_url):
    prefill, seen = shown(page, site_url, SHORT_PROMPT)
    tokens = prefill["tokens"]
    assert 37 < len(tokens) <= 64, len(tokens)  # too many for every head's matrix, few enough to draw in full
    pieces = [t["text"].replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥") or "∅" for t in tokens]
    assert seen["rows"] == pieces and seen["cols"] == pieces  # one label per prompt token, the visitor's texts
    chosen = prefill["attention"]["default"]
    assert chosen["rule"] == RULE and chosen["full"]["shape"] == [len(tokens)] * 2
    assert seen["view"] == "default"
    attention = page.locator("he-attention")
    assert (attention.get_attribute("data-layer"), attention.get_attribute("data-head")) == (
        str(chosen["layer"] + 1), str(chosen["head"]))
    assert f"Layer {chosen['layer'] + 1}, head {chosen['head']} is shown first: {RULE}" in seen["caption"], seen["caption"]
    for theme in ("light", "dark"):
        check_masked(page, theme, "short")
    assert not page.errors, page.errors


def test_a_long_prompt_draws_block_averages_under_disjoint_ranges(page, site_url):
    prefill, seen = shown(page, site_url, LONG_PROMPT)
    count = len(prefill["tokens"])
    assert count > 64 and prefill["attention"]["mode"] == "summary"
    assert seen["rows"] == seen["cols"]
    spans = ranges(seen["cols"])
    assert spans[0][0] == 0 and spans[-1][1] == count - 1
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start == end + 1, spans  # disjoint and nothing left out
    assert seen["overflow"] in ("auto", "scroll")
    for theme in ("light", "dark"):
        check_masked(page, theme, "long")  # a block wholly after its row's queries is masked, not a pale 0
    assert seen["view"] == "blocks"
    assert "the first token" in seen["caption"] and "is shown first" in seen["caption"]
    assert "block block" not in seen["caption"]
    assert not page.errors, page.errors
