"""Embed pages choose what to show (step, layer, head, controls, caption) and save as static files (issue 17)."""
import html as html_lib
import json
import re

import pytest

from explainer.embeds import CHOICE_PARAMS, SECTIONS, example_ids
from explainer.services import recordings, slices
from explainer.models import RecordedRun
from tests.explainer.test_embeds import ROOT, element, run_id  # noqa: F401 (a fixture)
from tests.explainer.test_recordings import recorded_payloads  # noqa: F401 (a fixture)

CHOSEN = "step=max-entropy&layer=3&head=2&controls=scrubber&caption=off"
EXPECTED = {"step": "max-entropy", "layer": "3", "head": "2", "controls": "scrubber", "caption": "off"}


def inlined(html: str) -> dict:
    """The recording a static page carries in <script type="application/json" id="he-recording">."""
    match = re.search(r'<script id="he-recording" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no inlined recording"
    return json.loads(match.group(1))


@pytest.mark.django_db
def test_choices_pass_to_the_element_live_and_replayed(client, run_id):
    live = element(client.get(f"/embed/attention/?{CHOSEN}&prompt=hi").content.decode(), "attention")
    assert {name: live[name] for name in CHOICE_PARAMS} == EXPECTED and live["prompt"] == "hi"
    replay = element(client.get(f"/embed/attention/?run={run_id}&{CHOSEN}").content.decode(), "attention")
    assert replay == {"run": run_id, **EXPECTED}
    first = example_ids()[0]
    example = element(client.get(f"/embed/dice/?example={first}&step=2").content.decode(), "dice")
    assert example == {"example": first, "step": "2"}
    # Empty values are left out, long ones cut, and markup stays text.
    attrs = element(client.get('/embed/dice/?step=&layer="><b>x</b>').content.decode(), "dice")
    assert "step" not in attrs and attrs["layer"] == "&quot;&gt;&lt;b&gt;x&lt;/b&gt;"


def test_static_page_inlines_the_saved_recording(client, run_id):
    response = client.get(f"/embed/dice/static/?run={run_id}&step=2&caption=off")
    assert response.status_code == 200
    page = response.content.decode()
    assert element(page, "dice") == {"src": "#he-recording", "step": "2", "caption": "off"}
    recording = inlined(page)
    stored = recordings.as_json(RecordedRun.find(run_id))
    # The dice's slice: what the dice draws, as GET /api/runs/<id>/dice serves it.
    assert recording == slices.slice_recording({**stored, "article_url": recording["article_url"]}, "dice", SECTIONS)
    assert recording["slice"]["section"] == "dice" and recording["id"] == run_id
    assert recording["article_url"] == f"http://testserver/runs/{run_id}"
    assert f'href="http://testserver/runs/{run_id}#dice"' in page  # the full article, absolute: the file lives elsewhere
    assert '<script type="module" src="/static/js/embed.js"></script>' in page  # default: this server's static files
    assert "<script>" not in page  # no inline script: the site's CSP allows only 'self'
    assert "frame-ancestors *" in response["Content-Security-Policy"]


@pytest.mark.django_db
def test_static_page_of_an_example_with_relative_assets(client):
    first = example_ids()[0]
    page = client.get(f"/embed/tokens/static/?example={first}&assets=static/").content.decode()
    shipped = json.loads((ROOT / "static/examples" / f"{first}.json").read_text())
    assert inlined(page)["payloads"] == slices.slice_recording(shipped, "tokens", SECTIONS)["payloads"]
    assert '<script type="module" src="static/js/embed.js"></script>' in page
    for sheet in ("site.css", "embed.css"):  # the diagrams bring elements.css into their shadow roots
        assert f'<link rel="stylesheet" href="static/css/{sheet}">' in page
    assert client.get(f"/embed/tokens/static/?example={first}&assets=../../he/static/").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("assets", ["https://evil.example/", "//evil.example/", "static", "java script:/", 'x"/'])
def test_static_page_refuses_assets_on_another_host(client, assets):
    response = client.get("/embed/tokens/static/", {"example": example_ids()[0], "assets": assets})
    assert response.status_code == 400
    assert response.content.decode().startswith("assets:")


@pytest.mark.django_db
def test_static_page_needs_a_recording(client):
    live = client.get("/embed/tokens/static/?prompt=hi")
    assert live.status_code == 400 and b"run or example" in live.content
    assert client.get("/embed/tokens/static/?run=no-such-run").status_code == 404
    assert client.get("/embed/tokens/static/?example=no-such-example").status_code == 404
    assert client.get(f"/embed/nope/static/?example={example_ids()[0]}").status_code == 404


def test_api_recording_names_its_replay_page_absolutely(client, run_id):
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["url"] == f"/runs/{run_id}"  # unchanged
    assert body["article_url"] == f"http://testserver/runs/{run_id}"


@pytest.mark.django_db
@pytest.mark.parametrize("section", list(SECTIONS))
def test_every_section_has_a_static_page(client, section):
    page = client.get(f"/embed/{section}/static/?example={example_ids()[0]}").content.decode()
    assert element(page, section)["src"] == "#he-recording"
    assert html_lib.unescape(str(SECTIONS[section][1])) in html_lib.unescape(page)
