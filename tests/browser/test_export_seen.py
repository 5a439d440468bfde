"""Export what is seen (issue 27, point 4): every section's SVG holds the text a reader sees in the diagram,
CSS-drawn text (`::before`/`::after` content, the "→" between stages) included and in place, and no controls
(menus, buttons, sliders, "Show as table")."""
import difflib
import re
import xml.etree.ElementTree as ET

from tests.browser.test_embed import recording  # noqa: F401  (fixture)
from tests.browser.test_export import SECTIONS, STEP, SVG, svg_of

# What a reader sees in the figure, computed independently of export.js: the figure's innerText (the layout's
# own text, in reading order), with each pseudo-element's string content put in place as text and the
# controls (and screen-reader-only text) hidden first; everything is put back afterwards.
SEEN = """(element) => {
  const figure = element.figure;
  const CONTROL = "button, select, input, textarea, details";
  const controls = [...figure.querySelectorAll(`${CONTROL}, label, [role=group], .he-measure-bar, .he-sr-only`)].filter((n) =>
    n.matches(CONTROL) || n.matches(".he-sr-only") || (n.localName === "label" ? Boolean(n.control) : Boolean(n.querySelector(CONTROL))));
  const undo = [];
  for (const node of [figure, ...figure.querySelectorAll("*")]) {
    for (const where of ["before", "after"]) {
      const cs = getComputedStyle(node, `::${where}`);
      const strings = [...cs.content.matchAll(/"((?:[^"\\\\]|\\\\.)*)"/g)].map((m) => m[1]).join("");
      if (!strings || cs.display === "none" || node.closest(CONTROL)) continue;
      const text = document.createTextNode(` ${strings} `);
      node[where === "before" ? "prepend" : "append"](text);
      undo.push(() => text.remove());
    }
  }
  for (const node of controls) {
    const before = node.style.visibility;
    node.style.visibility = "hidden";
    undo.push(() => { node.style.visibility = before; });
  }
  const seen = figure.innerText;
  undo.forEach((f) => f());
  return seen;
}"""


def squeeze(text: str) -> str:
    """Whitespace does not count: an SVG has one <text> per line or run, innerText breaks lines its own way."""
    return re.sub(r"\s+", "", text)


def svg_text(root: ET.Element) -> str:
    """The SVG's text in document order: every <text> (with its <tspan>s), none of the <title>s."""
    return " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def assert_same_text(exported: str, seen: str) -> None:
    if squeeze(exported) == squeeze(seen):
        return
    diff = difflib.unified_diff(seen.split(), exported.split(), "seen", "exported", lineterm="", n=2)
    raise AssertionError("the SVG's text is not the diagram's as seen\n" + "\n".join(list(diff)[:60]))


def arrows_in_place(page, root: ET.Element) -> None:
    """The stages' pipeline: each stage but the last ends in a CSS "→" (.he-pipe li::after), drawn inside that stage's box."""
    boxes = page.locator("he-stages").evaluate("""(e) => { const f = e.figure.getBoundingClientRect();
      return [...e.figure.querySelectorAll(".he-pipe li")].map((li) => { const r = li.getBoundingClientRect();
        return { left: r.left - f.left, right: r.right - f.left, top: r.top - f.top, bottom: r.bottom - f.top }; }); }""")
    arrows = [(float(t.get("x")), float(t.get("y"))) for t in root.iter(f"{SVG}text") if "".join(t.itertext()).strip() == "→"]
    assert len(boxes) > 2 and len(arrows) == len(boxes) - 1, (boxes, arrows)
    for box, (x, y) in zip(boxes, arrows):
        assert box["left"] < x < box["right"] and box["top"] < y <= box["bottom"], (box, x, y)


# The boxes of the attention figure's controls, in the figure's (the SVG's) coordinates, and its menus' options.
CONTROL_BOXES = """(e) => { const f = e.figure.getBoundingClientRect();
  const boxes = [...e.figure.querySelectorAll("select, button, summary")].map((n) => n.getBoundingClientRect())
    .filter((r) => r.width && r.height).map((r) => ({ left: r.left - f.left, right: r.right - f.left, top: r.top - f.top, bottom: r.bottom - f.top }));
  return { boxes, options: [...e.figure.querySelectorAll("select option")].map((o) => o.textContent.trim()) }; }"""


def no_attention_controls(page, root: ET.Element) -> None:
    """No Layer/Head menu (its label, its chosen option, drawn where the menu is), no "Full matrix" button, no
    "Show as table" toggle. Option texts ("head 3") may be diagram text elsewhere (the per-head list): only
    nothing painted inside a menu's box counts."""
    controls = page.locator("he-attention").evaluate(CONTROL_BOXES)
    assert len(controls["boxes"]) >= 3 and len(controls["options"]) > 2, controls  # two menus, one toggle at least
    texts = [("".join(t.itertext()).strip(), float(t.get("x", -1)), float(t.get("y", -1))) for t in root.iter(f"{SVG}text")]
    inside = [(text, x, y) for text, x, y in texts for b in controls["boxes"]
              if b["left"] <= x <= b["right"] and b["top"] <= y <= b["bottom"]]
    assert not inside, inside
    assert not {"Layer", "Head"} & {text for text, _, _ in texts}
    joined = svg_text(root)
    assert "Full matrix" not in joined and "Show as table" not in joined, joined


def test_every_section_exports_the_text_it_shows(page, site_url, recording):  # noqa: F811
    """All sections of a replayed recording on the article: the SVG's text is the figure's text as seen."""
    run_id, _ = recording
    page.goto(f"{site_url}/runs/{run_id}#step={STEP}")
    failures = []
    for section in SECTIONS:
        element = f"he-{section}"
        page.locator(element).first.scroll_into_view_if_needed()
        page.wait_for_selector(f"{element}[data-rendered]", state="attached", timeout=20_000)
        root, _ = svg_of(page, page, element)
        seen = page.locator(element).first.evaluate(SEEN)
        try:  # every section's mismatch is reported, not only the first
            assert_same_text(svg_text(root), seen)
            if section == "stages":
                arrows_in_place(page, root)
            if section == "attention":
                no_attention_controls(page, root)
        except AssertionError as err:
            failures.append(f"he-{section}: {err}")
    assert not failures, "\n\n".join(failures)
    assert not page.errors, page.errors
