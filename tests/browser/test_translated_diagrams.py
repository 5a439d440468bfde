"""Every diagram in another language, in Chromium (issue 28 points 1, 2 and 5): the article drawn from its recorded
example in French, Spanish and Chinese shows no English sentence the English page shows (inside the diagrams'
shadow roots too: what static/js builds), numbers are written the language's way, axe finds nothing on it scrolled
through; and a diagram on an author's page takes its own `lang=` (two languages on one page)."""
import gettext
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.test_accessibility import axe_page, scroll_through, violations  # noqa: F401 (fixture)
from tests.browser.test_embed import author_page, html  # noqa: F401 (fixture)
from tests.conftest import full_range
from tests.support import ROOT

EXAMPLES = ROOT / "static" / "examples"

# Model text and code, never translated: token chips and pieces, the model's reply and template text, ids, code,
# protocol names (translate="no", which tells a browser's translator too) and the model's config table.
MODEL_TEXT = (".he-chip, .he-piece, .he-id, .he-token, .he-text, .he-reply, .he-template-text, code, pre, kbd, [translate=no], "
              ".model-description")
# Whatever a reader sees on the page and inside every diagram's shadow root (text, aria-label, title, placeholder),
# less model text; each with the diagram it is in.
VISIBLE_TEXT = """(skip) => {
  const out = [];
  const visit = (root, where) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let node = walker.currentNode; node; node = walker.nextNode()) {
      if (node.nodeType !== 1 && node.nodeType !== 3) continue; // the shadow root itself
      const host = node.nodeType === 3 ? node.parentElement : node;
      if (!host || host.closest(skip) || host.closest('[hidden], script, style, template')) continue;
      if (node.nodeType === 3) { const t = node.textContent.replace(/\\s+/g, ' ').trim(); if (t) out.push([where, t]); continue; }
      for (const a of ['aria-label', 'title', 'placeholder']) if (node.getAttribute(a)) out.push([where, node.getAttribute(a)]);
      if (node.shadowRoot) visit(node.shadowRoot, node.localName);
    }
  };
  visit(document.body, 'page');
  return out;
}"""
# The article's diagrams (each drawn once seen).
DIAGRAMS = """() => [...new Set([...document.querySelectorAll('main *')].filter((e) => e.localName.startsWith('he-')
  && e.shadowRoot && !e.closest('[hidden]')).map((e) => e.localName))]"""
# The article's diagrams that have not drawn (they draw when first seen: scroll_through passed them all).
UNDRAWN = """() => [...document.querySelectorAll('main *')].filter((e) => e.localName.startsWith('he-') && e.shadowRoot
  && !e.closest('[hidden]') && !e.dataset.rendered).map((e) => e.localName)"""
# Names and symbols spelled the same in every language.
SAME = {"Hit Enter", "top-k", "top-p", "min-p", "softmax", "logit", "logits", "KV", "English", "Français", "Español",
        "简体中文", "Pause", "Licence", "CSV", "JSON", "SVG", "PNG", "Prompt", "SmolLM2-135M-Instruct", "GGUF", "RoPE",
        "Q4_1", "float32", "bfloat16", "int8", "Apache-2.0", "CPU", "GPU", "UTC", "Top-k", "residual"}
LANGS = ["fr", "es", "zh-hans"]
UNITS = r"\b(?:KiB|MiB|GiB|ms|floor)\b"  # beside numbers, the same in every language
DECIMAL = {"fr": ",", "es": ",", "zh-hans": "."}
ROLL = {"en": "fell between", "fr": "est tombé entre", "es": "cayó entre"}  # where u fell, in he-dice


def drawn_article(page, url: str) -> list[list[str]]:
    """The article at `url` with its example drawn whole and every diagram scrolled past (they draw when seen)."""
    page.goto(url)
    expect(page.locator("#example-bar")).to_have_attribute("data-example", re.compile(r".+"), timeout=60_000)
    page.mouse.wheel(0, 300)  # the whole example replaces its first paint at the first scroll
    expect(page.locator("#example-bar")).to_have_attribute("data-whole", re.compile(r".+"), timeout=60_000)
    for name in page.evaluate(DIAGRAMS):  # each one seen, so each one draws
        node = page.locator(f"main {name}").first
        node.scroll_into_view_if_needed()
        expect(node).to_have_attribute("data-rendered", re.compile(r"\d+"), timeout=30_000)
    scroll_through(page)
    undrawn = page.evaluate(UNDRAWN)
    assert not undrawn, f"diagrams not drawn: {undrawn}; errors: {page.errors}"
    return page.evaluate(VISIBLE_TEXT, MODEL_TEXT)


def recorded_strings() -> set[str]:
    """Every string in the shipped examples' payloads (token texts, template text, the reply, protocol values):
    model text and data, which the page shows as they are in any language."""
    found = set()

    def walk(value):
        if isinstance(value, str):
            found.add(value)
            found.add(value.strip())
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    for entry in json.loads((EXAMPLES / "index.json").read_text()):
        walk(json.loads((EXAMPLES / entry["file"]).read_text())["payloads"])
    return found


def is_model_text(text: str, recorded: set[str]) -> bool:
    """A token chip's piece (␣ for a space), a position or id beside one, or a recorded value (field = value)."""
    plain = text.replace("\u2423", " ").replace("\u21b5", "\n").replace("\u21e5", "\t")
    if plain in recorded or plain.strip() in recorded or re.match(r"\w+_\w+: ", plain):  # or a raw field dump
        return True
    parts = re.split(r"[\s,:=]+", plain.strip())
    return all(p in recorded or re.fullmatch(r"[-+]?[\d.,%]+|true|false|#?\d+", p) or re.fullmatch(r"\w+_\w+", p)
               for p in parts if p)


def same_in(lang: str) -> re.Pattern:
    """The site's strings a language writes as English does ("tokens", "position", "cache" in French), from its
    compiled catalogs: one pattern, each `%(name)s` matching any value."""
    folder = ROOT / "locale" / lang.replace("zh-hans", "zh_Hans") / "LC_MESSAGES"
    same = set()
    for domain in ("django", "djangojs"):
        with open(folder / f"{domain}.mo", "rb") as file:
            catalog = gettext.GNUTranslations(file)._catalog
        same |= {key for key, value in catalog.items() if isinstance(key, str) and key and value == key}
        same |= {key[0] for key, value in catalog.items() if isinstance(key, tuple) and value == key[0]}
    parts = [re.escape(text).replace(r"%\(", "%(").replace(r"\)s", ")s") for text in sorted(same) if text]
    parts = [re.sub(r"%\(\w+\)s", ".+?", part) for part in parts]
    return re.compile("|".join(f"(?:{p})" for p in parts) or "(?!)")


def english_left(english: list[list[str]], theirs: list[list[str]], lang: str) -> list[tuple[str, str]]:
    """Texts of the translated page that the English page shows too and that read as English words, less model
    text and what the language's translators wrote the same on purpose."""
    known = {text for _, text in english}
    recorded, same = recorded_strings(), same_in(lang)
    return sorted({(where, text) for where, text in theirs
                   if text in known and re.search(r"[A-Za-z]{3,}", re.sub(UNITS, "", text)) and text not in SAME
                   and not is_model_text(text, recorded) and not same.fullmatch(text)})


@pytest.mark.slow
def test_every_diagram_is_in_the_pages_language_and_axe_finds_nothing(axe_page, site_url):
    """All three languages under CI (full_range()), French alone otherwise: the same code draws each."""
    page = axe_page
    english = drawn_article(page, site_url + "/?lang=en")
    assert len({where for where, _ in english}) >= 20, "the diagrams did not draw"
    for lang in LANGS if full_range() else ["fr"]:
        theirs = drawn_article(page, site_url + f"/?lang={lang}")
        left = english_left(english, theirs, lang)
        Path(f"/tmp/left-{lang}.txt").write_text("\n".join(f"{w}: {t}" for w, t in left))
        assert not left, f"English left in {lang}:\n" + "\n".join(f"{w}: {t}" for w, t in left)
        # numbers the language's way: the dice's interval ends (decimal(…, 6)) and the kv sizes
        dice = page.locator("he-dice")
        assert re.search(rf"0{re.escape(DECIMAL[lang])}\d{{3}}", "".join(t for w, t in theirs if w == "he-dice")), lang
        found = violations(page, frames=False)
        assert not found, f"axe-core found in {lang}:\n" + json.dumps(found, indent=1)
        assert dice.count() == 1
    assert not page.errors, page.errors


BODY = '<he-dice id="fr" example="biopsy" lang="fr"></he-dice><he-dice id="es" example="biopsy" lang="es"></he-dice>' \
       '<he-dice id="en" example="biopsy"></he-dice>'


def test_a_diagram_on_an_authors_page_speaks_its_own_lang(page, site_url, author_page):
    """Three copies of one diagram on another site's page: `lang="fr"`, `lang="es"` and none (the page's English);
    each loads its words cross-origin (/jsi18n.json) and writes numbers its language's way."""
    page.goto(author_page("langs.html", html(site_url, BODY)))
    texts = {}
    for lang in ("fr", "es", "en"):
        dice = page.locator(f"he-dice#{lang}")
        dice.scroll_into_view_if_needed()
        expect(dice).to_have_attribute("data-rendered", re.compile(r"\d+"), timeout=30_000)
    for lang in ("fr", "es"):  # drawn in English at first, again once the language's catalog is in
        page.wait_for_function(f"() => document.querySelector('he-dice#{lang}').shadowRoot.textContent.includes('{ROLL[lang]}')")
    for lang in ("fr", "es", "en"):
        texts[lang] = page.locator(f"he-dice#{lang}").evaluate("(e) => e.shadowRoot.textContent")
    assert ROLL["en"] in texts["en"] and ROLL["fr"] not in texts["en"]
    assert re.search(r"0,\d{3}", texts["fr"]) and re.search(r"0,\d{3}", texts["es"]) and not re.search(r"0,\d{3}", texts["en"])
    assert not page.errors, page.errors
