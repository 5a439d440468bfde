"""What a language costs, on the article in Chromium (issue 28 point 4): the table is the server's own count of the
six lines (checked against the `serving` frames), a line the reader edits is counted again as typed, the costliest
line is said in words, right-to-left text keeps its direction, and each line's prefill is timed on request."""
import re

from playwright.sync_api import expect

from tests.browser.test_workshop import socket_frames


def counted(frames, what="languages"):
    return [f for f in frames if f["type"] == "serving" and f["what"] == what]


def open_languages(page, url):
    frames = socket_frames(page)
    page.goto(url + "/#languages")
    node = page.locator("he-languages")
    node.scroll_into_view_if_needed()
    expect(node).to_have_attribute("data-rows", "6", timeout=60_000)
    return node, frames


def table_of(node) -> dict[str, int]:
    return {row.get_attribute("data-lang"): int(row.get_attribute("data-tokens")) for row in node.locator("tbody tr").all()}


def test_the_languages_table_is_the_servers_count_and_a_reader_can_edit_a_line(page, site_url):
    node, frames = open_languages(page, site_url)
    data = counted(frames)[-1]["data"]
    assert table_of(node) == {r["lang"]: r["tokens"] for r in data["rows"]}
    arabic = node.locator('input[data-lang="ar"]')
    assert arabic.get_attribute("dir") == "auto" and arabic.evaluate("i => getComputedStyle(i).direction") == "rtl"
    dearest = max(data["rows"][1:], key=lambda r: r["tokens"])
    expect(node.locator(".he-lang-words")).to_contain_text(f"{dearest['name']} costs {dearest['tokens_vs_first']:.1f}× the tokens")

    english = node.locator('input[data-lang="en"]')
    english.fill("A mole.")
    node.locator('button.he-measure[data-what="languages"]').click()
    for _ in range(100):
        if any(r["text"] == "A mole." for f in counted(frames) for r in f["data"]["rows"]):
            break
        page.wait_for_timeout(100)
    mine = counted(frames)[-1]["data"]
    assert mine["rows"][0]["text"] == "A mole." and [r["text"] for r in mine["rows"][1:]] == [r["text"] for r in data["rows"][1:]]
    expect(node.locator('tbody tr[data-lang="en"]')).to_have_attribute("data-tokens", str(mine["rows"][0]["tokens"]))
    expect(english).to_have_value("A mole.")  # the edit survives the redraw

    node.locator('button.he-measure[data-what="languages_prefill"]').click()  # times the lines as edited
    for _ in range(1200):
        timed = next((f["data"] for f in counted(frames, "languages_prefill") if f["data"]["rows"][0]["text"] == "A mole."), None)
        if timed:
            break
        page.wait_for_timeout(100)
    assert timed is not None
    for row in timed["rows"]:
        item = node.locator(f'.he-lang-times li[data-lang="{row["lang"]}"]')
        expect(item).to_contain_text(f"for {row['tokens']} token")
    assert not page.errors, page.errors


def test_what_each_language_costs_on_smollm2(page, smollm2_url):
    """The figures the closing note quotes: SmolLM2's tokenizer on the article's sentence in six languages."""
    node, frames = open_languages(page, smollm2_url)
    data = counted(frames)[-1]["data"]
    tokens = table_of(node)
    print({r["name"]: (r["tokens"], r["chars_per_token"], r["partial_tokens"], r["kv_bytes"]) for r in data["rows"]})
    assert tokens["en"] < min(tokens[lang] for lang in ("fr", "es", "zh", "ja", "ar"))
    assert re.search(r"costs \d+(\.\d)?× the tokens of English here", node.locator(".he-lang-words").inner_text())
