"""A recording is data, never code (issue 22, N7): a run whose `part` piece path is ["__proto__", "toString"] is
refused by the server when saved, and by the page when it replays a recording file the server never saw (embed.js
with `src=` on an author's page): a named error, and Object.prototype stays as it was."""
import copy
import json
import re
import urllib.error

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
def poisoned_payloads(site_url):
    """A real run's payloads whose last step is sent as a head and one part, the part's piece aimed at the prototype."""
    _, payloads = record(site_url)
    last = max(i for i, p in enumerate(payloads) if p["type"] == "step")
    head = copy.deepcopy(payloads[last])
    head["parts"] = 1
    part = {"type": "part", "schema_version": SCHEMA_VERSION, "of": "step", "index": 1, "count": 1,
            "pieces": [{"path": POISON, "text": " pwned"}]}
    return [*payloads[:last], head, part, *payloads[last + 1:]]


def test_the_server_refuses_to_store_a_part_path_through_the_prototype(site_url, poisoned_payloads):
    with pytest.raises(urllib.error.HTTPError) as refused:
        save(site_url, poisoned_payloads)
    error = json.loads(refused.value.read())["error"]
    assert refused.value.code == 400 and error["code"] == "invalid_payload" and "'__proto__' is not a data key" in error["message"]


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


def test_a_recording_file_on_an_authors_page_refuses_the_part_and_keeps_the_prototype(page, site_url, poisoned_payloads,
                                                                                      author_page):  # noqa: F811
    """A recording the server never saw (`src=` a file the author hosts) still cannot reach the prototype."""
    recording = {"schema_version": SCHEMA_VERSION, "messages": [{"role": "user", "content": "x"}], "params": {}, "seed": 3,
                 "model_spec": "bundled", "payloads": poisoned_payloads}
    author_page("poisoned.json", json.dumps(recording))
    url = author_page("poisoned.html", html(site_url, '<he-tokens src="poisoned.json"></he-tokens>'))
    refused_and_intact(page, url)
    page.locator("he-tokens").scroll_into_view_if_needed()  # the rest of the recording still replays
    expect(page.locator("he-tokens")).to_have_attribute("data-token-count", re.compile(r"^[1-9]"), timeout=15_000)
