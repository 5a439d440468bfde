"""A recording is data, never code (issue 22, N7): a saved run whose `part` piece path is ["__proto__", "toString"]
is refused with a named error where it is replayed (its permalink, an iframe embed, embed.js on an author's page),
and Object.prototype stays as it was."""
import copy
import re

import pytest
from playwright.sync_api import expect

from inference.wire.schema import SCHEMA_VERSION
from tests.browser.test_embed import author_page, html  # noqa: F401 (author_page: a fixture)
from tests.browser.test_replay import record, save

POISON = ["__proto__", "toString"]
PROTOTYPE_INTACT = """() => {
  let text;
  try { text = String({}); } catch (e) { text = `threw ${e}`; }
  return { text, toString: typeof Object.prototype.toString,
           added: Object.getOwnPropertyNames(Object.prototype).filter((k) => typeof Object.prototype[k] !== "function"
                                                                          && k !== "__proto__") };
}"""


@pytest.fixture(scope="module")
def poisoned_run(site_url):
    """A real recording whose last step is sent as a head and one part, the part's piece aimed at the prototype."""
    _, payloads = record(site_url)
    last = max(i for i, p in enumerate(payloads) if p["type"] == "step")
    head = copy.deepcopy(payloads[last])
    head["parts"] = 1
    part = {"type": "part", "schema_version": SCHEMA_VERSION, "of": "step", "index": 1, "count": 1,
            "pieces": [{"path": POISON, "text": " pwned"}]}
    url = save(site_url, [*payloads[:last], head, part, *payloads[last + 1:]])
    return url.rsplit("/", 1)[1]


def refused_and_intact(page, url: str) -> None:
    """Open `url`; once the page has read the recording, Object.prototype is intact and the refusal was named."""
    refusals = []
    page.on("console", lambda m: refusals.append(m.text) if m.type == "error" and "bad_part_path" in m.text else None)
    page.goto(url)
    for _ in range(50):  # the recording is fetched and joined after load
        if refusals:
            break
        page.wait_for_timeout(200)
    assert page.evaluate(PROTOTYPE_INTACT) == {"text": "[object Object]", "toString": "function", "added": []}
    assert refusals and "is not one of its own strings or lists" in refusals[0], refusals
    assert not [e for e in page.errors if "toString" in e or "Cannot convert object" in e], page.errors


def test_the_permalink_refuses_the_part_and_keeps_the_prototype(page, site_url, poisoned_run):
    refused_and_intact(page, f"{site_url}/runs/{poisoned_run}")
    page.locator("he-tokens").scroll_into_view_if_needed()  # the rest of the recording still replays
    expect(page.locator("he-tokens")).to_have_attribute("data-token-count", re.compile(r"^[1-9]"), timeout=15_000)


def test_the_iframe_embed_refuses_the_part_and_keeps_the_prototype(page, site_url, poisoned_run):
    refused_and_intact(page, f"{site_url}/embed/tokens/?run={poisoned_run}")


def test_embed_js_on_an_authors_page_refuses_the_part_and_keeps_the_prototype(page, site_url, poisoned_run, author_page):  # noqa: F811
    url = author_page("poisoned.html", html(site_url, f'<he-tokens run="{poisoned_run}"></he-tokens>'))
    refused_and_intact(page, url)
