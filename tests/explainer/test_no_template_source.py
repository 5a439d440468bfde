"""No rendered page shows template source (issue 27, point 3): a two-line {# #} comment is printed as text by Django,
as the saved static page once showed its own comment at the top."""
import re

import pytest

from explainer.embeds import SECTIONS, example_ids
from explainer.services.device import model_registry
from tests.explainer.test_embeds import run_id  # noqa: F401 (a fixture)
from tests.explainer.test_recordings import recorded_payloads  # noqa: F401 (a fixture)
from tests.explainer.test_workshop import PASSWORD, workshop_on  # noqa: F401 (a fixture)
from tests.support import stories_spec

TEMPLATE_SOURCE = re.compile(r"\{#|#\}|\{%|%\}|\{\{|\}\}")
# Data, not markup: a recording inlined as JSON may hold any text a model wrote (it is never parsed as a template).
DATA_SCRIPTS = re.compile(r'<script[^>]*type="application/json"[^>]*>.*?</script>', re.S)


def pages(run: str) -> list[str]:
    example = example_ids()[0]
    urls = ["/", f"/runs/{run}", "/runs/not-a-run", "/embed/", "/embed/?live=1", f"/embed/?run={run}", "/host/",
            "/host/present/", "/no-such-page/", "/embed/nothing/", "/admin/login/"]
    for section in SECTIONS:
        urls += [f"/embed/{section}/", f"/embed/{section}/?run={run}", f"/embed/{section}/?example={example}&caption=Mine",
                 f"/embed/{section}/static/?run={run}", f"/embed/{section}/static/?example={example}&assets=static/"]
    return urls


@pytest.mark.django_db
def test_no_rendered_page_shows_template_source(client, settings, run_id, workshop_on):
    settings.EXPLAINER_MODEL, settings.EXPLAINER_DEVICE = stories_spec(), "cpu"
    model_registry.reset()
    client.post("/host/", {"password": PASSWORD})  # the host's pages too, logged in
    shown = {}
    for url in pages(run_id):
        response = client.get(url)
        assert response.status_code in (200, 302, 404), (url, response.status_code)
        text = DATA_SCRIPTS.sub("", response.content.decode())
        shown[url] = response.status_code
        assert not TEMPLATE_SOURCE.search(text), (url, TEMPLATE_SOURCE.search(text) and text[max(0, TEMPLATE_SOURCE.search(text).start() - 120):][:300])
    assert sum(code == 200 for code in shown.values()) >= 5 * len(SECTIONS), shown
