"""Embed pages, their frame headers, and CORS on what other origins load (docs/embedding.md)."""
import re
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.testing import WebsocketCommunicator

from explainer.asgi import application
from explainer.embeds import LIVE_PARAMS, SECTIONS, example_ids
from explainer.models import RecordedRun
from explainer.services.device import model_registry
from tests.explainer.test_recordings import recorded_payloads  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
@pytest.fixture
def run_id(db, recorded_payloads):
    """A stored recording of a real run (the API refuses to serve a broken one, issue 16)."""
    return RecordedRun.objects.create(model_spec="bundled", messages=[{"role": "user", "content": "hi"}], params={},
                                      seed=0, schema_version=1, payloads=recorded_payloads).pk


def element(html: str, section: str) -> dict:
    """The attributes of the page's first <he-SECTION> element (a valueless one reads as "")."""
    match = re.search(rf'<he-{section}((?:\s+[a-z_]+(?:="[^"]*")?)*)></he-{section}>', html)
    assert match, f"no <he-{section}> in the page"
    return {name: value for name, value in re.findall(r'([a-z_]+)(?:="([^"]*)")?', match.group(1))}


def test_sections_are_the_article_diagrams():
    on_disk = {p.stem.removeprefix("he-") for p in (ROOT / "static/js/elements").glob("he-*.js")}
    # <he-pipeline> is the article's map of the sections, not one; <he-languages> (what a language costs) is the
    # article's own table of the served tokenizer's counts, not yet an embed (issue 28); <he-compare> is the article's
    # compare mode (issue 29): an embed shows a saved pair with `compare` on a step diagram instead
    assert set(SECTIONS) == on_disk - {"pipeline", "languages", "compare"}
    driver = (ROOT / "static/js/embed-driver.js").read_text()
    listed = re.search(r"export const SECTIONS = \[(.*?)\];", driver, re.S).group(1)
    assert re.findall(r'"([a-z]+)"', listed) == list(SECTIONS)
    anchors = dict(re.findall(r'(\w+): "(\w+)"', re.search(r"const ANCHORS = \{(.*?)\};", driver).group(1)))
    assert anchors == {slug: anchor for slug, (anchor, _title) in SECTIONS.items() if anchor != slug}


def test_every_section_links_to_its_place_in_the_article():
    article = (ROOT / "templates/index.html").read_text()
    for slug, (anchor, _title) in SECTIONS.items():
        assert re.search(rf'<section id="{anchor}">(?:(?!</section>).)*<he-{slug}>', article, re.S), slug


@pytest.mark.django_db
@pytest.mark.parametrize("section", list(SECTIONS))
def test_every_section_has_an_embed_page(client, section):
    response = client.get(f"/embed/{section}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert element(html, section)["prompt"]  # live by default
    assert "Hit Enter — full article" in html
    assert f'href="/#{SECTIONS[section][0]}"' in html
    assert '<script type="module" src="/static/js/embed.js"></script>' in html
    assert "<script>" not in html  # no inline script: the site's CSP allows only 'self'


@pytest.mark.django_db
def test_unknown_section_is_404(client):
    assert client.get("/embed/nope/").status_code == 404
    assert client.get("/embed/Tokens/").status_code == 404


@pytest.mark.django_db
def test_embed_pages_are_frameable_and_the_article_is_not(client, settings):
    settings.EXPLAINER_MODEL, settings.EXPLAINER_DEVICE = "bundled", "cpu"
    model_registry.reset()
    embed = client.get("/embed/attention/")
    assert "X-Frame-Options" not in embed
    assert "frame-ancestors *" in embed["Content-Security-Policy"]
    article = client.get("/")
    assert article["X-Frame-Options"] == "DENY"
    assert "frame-ancestors *" not in article.get("Content-Security-Policy", "")
    model_registry.reset()


def test_run_passes_the_recording_id(client, run_id):
    response = client.get(f"/embed/kv/?run={run_id}&prompt=ignored")
    assert response.status_code == 200
    html = response.content.decode()
    assert element(html, "kv") == {"run": run_id}
    assert f'href="/runs/{run_id}#kv"' in html
    assert client.get("/embed/kv/?run=no-such-run").status_code == 404


@pytest.mark.django_db
def test_theme_reaches_the_element_and_the_page(client):
    html = client.get("/embed/dice/?example=biopsy&theme=dark").content.decode()
    assert element(html, "dice") == {"example": "biopsy", "theme": "dark"}
    assert '<html lang="en" data-theme="dark">' in html
    assert "theme" not in element(client.get("/embed/dice/?example=biopsy").content.decode(), "dice")  # auto
    refused = client.get("/embed/dice/?example=biopsy&theme=blue")
    assert refused.status_code == 400


@pytest.mark.django_db
def test_live_query_becomes_the_elements_attributes(client):
    query = "prompt=Why%20is%20the%20sky%20blue%3F&autostart=1&temperature=0.5&seed=7&max_new_tokens=9&bogus=1"
    attributes = element(client.get(f"/embed/tokens/?{query}").content.decode(), "tokens")
    assert attributes == {"prompt": "Why is the sky blue?", "autostart": "", "temperature": "0.5", "seed": "7",
                          "max_new_tokens": "9"}
    assert set(attributes) - {"prompt", "autostart"} <= set(LIVE_PARAMS)
    assert "autostart" not in element(client.get("/embed/tokens/?autostart=0").content.decode(), "tokens")


@pytest.mark.django_db
def test_prompt_stays_text(client):
    html = client.get('/embed/template/?prompt="><script>alert(1)</script>').content.decode()
    assert "<script>alert" not in html
    assert element(html, "template")["prompt"] == "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"


def test_demo_page_embeds_every_section_both_ways(client, run_id):
    html = client.get(f"/embed/?run={run_id}").content.decode()
    for section in SECTIONS:
        assert f'<iframe data-he-embed src="http://testserver/embed/{section}/?run={run_id}"' in html
        assert element(html, section) == {"run": run_id}
    assert client.get("/embed/?run=no-such-run").status_code == 404


@pytest.mark.django_db
def test_example_runs_embed_by_id(client):
    first = example_ids()[0]
    assert element(client.get(f"/embed/dice/?example={first}").content.decode(), "dice") == {"example": first}
    assert client.get("/embed/dice/?example=no-such-example").status_code == 404


@pytest.mark.django_db
def test_demo_page_shows_the_articles_example_or_live(client):
    first = example_ids()[0]
    html = client.get("/embed/").content.decode()
    assert f'<iframe data-he-embed src="http://testserver/embed/dice/?example={first}"' in html
    assert element(html, "dice") == {"example": first}
    live = client.get("/embed/?live=1").content.decode()
    assert '<iframe data-he-embed src="http://testserver/embed/dice/"' in live
    assert element(live, "dice")["prompt"]


def test_docs_demo_file_embeds_every_section_from_the_local_server():
    html = (ROOT / "docs/embed-demo.html").read_text()
    assert '<script type="module" src="http://127.0.0.1:8000/static/js/embed.js"></script>' in html
    for section in SECTIONS:
        assert element(html, section)["prompt"]
    assert "<iframe data-he-embed" in html


# ---- CORS, through the ASGI application (static files never reach Django's middleware) ----------

async def http(method: str, path: str, headers=()) -> dict:
    """One request through the whole ASGI application: {status, headers (lower-case names)}."""
    scope = {"type": "http", "http_version": "1.1", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": b"", "scheme": "http", "root_path": "", "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 5000), "headers": [(b"host", b"127.0.0.1"), *headers]}
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=30)
    while (await communicator.receive_output(timeout=30)).get("more_body"):
        pass
    return {"status": start["status"], "headers": {k.decode().lower(): v.decode() for k, v in start["headers"]}}


@pytest.mark.parametrize("path", ["/static/js/embed.js", "/static/js/elements/he-tokens.js", "/static/css/site.css"])
async def test_static_files_allow_any_origin(path):
    response = await http("GET", path, [(b"origin", b"http://blog.example")])
    assert response["status"] == 200
    assert response["headers"]["access-control-allow-origin"] == "*"


@pytest.mark.django_db(transaction=True)
async def test_recordings_allow_any_origin_to_read_but_not_to_write(run_id):
    origin = [(b"origin", b"http://blog.example")]
    read = await http("GET", f"/api/runs/{run_id}", origin)
    assert read["status"] == 200 and read["headers"]["access-control-allow-origin"] == "*"
    preflight = await http("OPTIONS", f"/api/runs/{run_id}", origin + [(b"access-control-request-method", b"GET")])
    assert preflight["status"] == 204
    assert preflight["headers"]["access-control-allow-origin"] == "*"
    assert "POST" not in preflight["headers"]["access-control-allow-methods"]
    write = await http("POST", "/api/runs", origin)
    assert write["status"] == 403  # CSRF: another origin cannot save recordings
    assert "access-control-allow-origin" not in write["headers"]
    write_preflight = await http("OPTIONS", "/api/runs", origin + [(b"access-control-request-method", b"POST")])
    assert "access-control-allow-origin" not in write_preflight["headers"]
    page = await http("GET", "/embed/tokens/", origin)
    assert "access-control-allow-origin" not in page["headers"]


@pytest.mark.django_db(transaction=True)
async def test_embed_socket_accepts_another_sites_page(settings):
    settings.EXPLAINER_MODEL = "bundled"
    communicator = WebsocketCommunicator(application, "/ws/embed/", headers=[(b"origin", b"http://blog.example")])
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(timeout=30))["state"] == "ready"
    await communicator.disconnect()
    refused = WebsocketCommunicator(application, "/ws/session/", headers=[(b"origin", b"http://blog.example")])
    assert not (await refused.connect())[0]  # the article's socket stays same-site
