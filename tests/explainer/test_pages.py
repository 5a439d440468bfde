"""The index page and health check show the loaded model, or say clearly why it is missing."""
import pytest

from explainer.services.device import model_registry
from tests.support import STORIES, stories_spec


@pytest.fixture(autouse=True)
def fresh_registry(settings):
    # Each test picks its own spec, so no loaded model may leak between tests.
    settings.EXPLAINER_DEVICE = "cpu"
    model_registry.reset()
    yield settings
    model_registry.reset()


@pytest.fixture
def stories(settings):
    settings.EXPLAINER_MODEL = stories_spec()


def test_index_names_the_model_and_describes_it(client, stories):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Hit Enter" in html
    assert "stories260K" in html
    for field in model_registry.get_model().description.to_dict():
        assert f"<th scope=\"row\">{field}</th>" in html
    assert "<th scope=\"row\">layers</th><td>5</td>" in html
    assert "<td>llama</td>" in html


def test_healthz_reports_the_model(client, stories):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["model"]["name"] == "stories260K"
    assert body["model"]["layers"] == 5
    assert body["model"]["family"] == "llama"


def test_unavailable_model_gives_a_clear_503(client, settings):
    settings.EXPLAINER_MODEL = "hit-enter-tests/no-such-model"
    response = client.get("/")
    assert response.status_code == 503
    html = response.content.decode()
    assert "The model could not be loaded" in html
    assert "hit-enter-tests/no-such-model" in html
    assert "EXPLAINER_MODEL" in html
    assert client.get("/healthz").status_code == 503


def test_a_slow_first_load_does_not_hold_the_page(client, stories, monkeypatch):
    """The page answers while the model loads in the background, and names it as loading."""
    import threading

    release = threading.Event()
    real_load = model_registry._load_target
    monkeypatch.setattr(model_registry, "_load_target", lambda: (release.wait(30), real_load())[1])
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "still loading this model" in html and str(STORIES) in html
    release.set()
    model_registry.get_model()
    assert "<th scope=\"row\">layers</th><td>5</td>" in client.get("/").content.decode()


def test_the_run_buttons_are_disabled_until_the_script_wires_them(client, stories):
    """Before the page's script runs (it enables each when the socket is open), Play would submit the form as a page
    load and the others would drop the click: a learner who clicks early, or a test that waits for Play, meets them."""
    from html.parser import HTMLParser

    ids = ("btn-play", "btn-compare", "btn-pause", "btn-step", "btn-resume", "btn-stop", "guess-mode")

    class RunBar(HTMLParser):
        def __init__(self):
            super().__init__()
            self.controls = {}

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if attrs.get("id") in ids:
                self.controls[attrs["id"]] = "disabled" in attrs

    bar = RunBar()
    bar.feed(client.get("/").content.decode())
    assert bar.controls == dict.fromkeys(ids, True)
