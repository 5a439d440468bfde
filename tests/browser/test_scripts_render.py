"""Wide and right-to-left scripts are drawn with real glyphs from the machine's own fonts (issue 28 point 5): the
Chinese article's first heading, and the Chinese, Japanese and Arabic lines of "What a language costs", are each rendered
by a font that has every one of their characters (Chromium's own report of the fonts it used, checked against
fontconfig's coverage), none downloaded by the page; the Arabic line runs right to left."""
import shutil
import subprocess
from functools import cache

from playwright.sync_api import Error, expect

from tests.conftest import require


@cache
def families_with(char: str) -> frozenset[str]:
    """The installed font families that have a glyph for `char` (fontconfig)."""
    fc_list = require(shutil.which("fc-list"), "fc-list", "apt-get install fontconfig")
    out = subprocess.run([fc_list, f":charset={ord(char):x}", "family"], capture_output=True, text=True, check=True).stdout
    return frozenset(name.strip() for line in out.splitlines() for name in line.split(","))


def nodes(tree: dict):
    """Every node of a CDP DOM tree, shadow roots included."""
    yield tree
    for child in tree.get("children", []) + tree.get("shadowRoots", []):
        yield from nodes(child)


def fonts_used(cdp, node_id: int) -> list[dict]:
    return cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]


def assert_drawn_with_real_glyphs(cdp, node: dict, text: str) -> None:
    used = fonts_used(cdp, node["nodeId"])
    assert used and not any(f["isCustomFont"] for f in used), used  # the machine's fonts, none downloaded
    families = {f["familyName"] for f in used}
    missing = sorted({c for c in text if not c.isspace() and not families & families_with(c)})
    assert not missing, f"{text!r}: no glyph in {families} for {missing}"


def check_fonts(cdp) -> set[str]:
    """Each language's line of "What a language costs" and the first Chinese heading, checked; returns which."""
    tree = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
    checked = set()
    for found in nodes(tree):
        attrs = dict(zip(found.get("attributes", [])[::2], found.get("attributes", [])[1::2]))
        lang = attrs.get("lang")
        if found.get("localName") == "input" and lang in ("ja", "ar", "zh") and lang not in checked:
            assert_drawn_with_real_glyphs(cdp, found, attrs.get("value", ""))  # each language's line as typed
            checked.add(lang)
        if found.get("localName") == "h2" and "heading" not in checked:
            text = "".join(c.get("nodeValue", "") for c in nodes(found) if c.get("nodeType") == 3)
            if any("\u4e00" <= c <= "\u9fff" for c in text):  # the first heading in Chinese
                assert_drawn_with_real_glyphs(cdp, found, text)
                checked.add("heading")
    return checked


def test_chinese_japanese_and_arabic_are_drawn_with_glyphs_from_the_machines_fonts(page, site_url):
    page.goto(site_url + "/?lang=zh-hans#languages")
    node = page.locator("he-languages")
    node.scroll_into_view_if_needed()
    expect(node).to_have_attribute("data-rows", "6", timeout=60_000)
    assert node.locator('li.he-chip[lang="ar"][dir="auto"]').count() >= 1
    arabic = node.locator('input[data-lang="ar"]')
    assert arabic.get_attribute("dir") == "auto" and arabic.evaluate("e => getComputedStyle(e).direction") == "rtl"
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    for attempt in range(5):  # a diagram redrawn meanwhile (its measurement came in) replaced the nodes: look again
        try:
            checked = check_fonts(cdp)
            break
        except Error as exc:
            if "Could not find node" not in str(exc) or attempt == 4:
                raise
            page.wait_for_timeout(500)
    assert checked == {"ja", "ar", "zh", "heading"}, checked
    assert not page.errors, page.errors
