"""The page says which model it runs and what to expect of it, and shows load progress while it loads."""
import threading

import pytest

from explainer.services.device import model_registry
from inference.shipped import NOTICES, SMOLLM2


@pytest.fixture(autouse=True)
def fresh_registry(settings):
    settings.EXPLAINER_DEVICE = "cpu"
    settings.EXPLAINER_MODEL = "bundled"
    model_registry.reset()
    yield settings
    model_registry.reset()


def test_bundled_notice_is_at_the_top_and_the_config_folds_under_it(client):
    model_registry.get_model()
    html = client.get("/").content.decode()
    expect = "5M parameters trained on WordNet definitions: it answers &#x27;what is X&#x27; questions, not much else"
    assert expect in html
    assert html.index(expect) < html.index('<details class="model-details">') < html.index('id="try"')
    assert '<th scope="row">layers</th>' in html  # the raw description, folded


def test_every_shipped_model_says_what_to_expect():
    assert set(NOTICES) == {"bundled", "smollm2-135m-instruct"}
    for notice in NOTICES.values():
        assert notice.expect and notice.licence and notice.origin and notice.size
    assert "Q4_1" in SMOLLM2.notice.weights and "dequantized" in SMOLLM2.notice.weights


def test_progress_is_served_while_the_model_loads(client, monkeypatch):
    release = threading.Event()
    real_load = model_registry._load_target

    def slow_load():
        model_registry._record_progress("first start: dequantizing", 0.25)
        release.wait(30)
        return real_load()

    monkeypatch.setattr(model_registry, "_load_target", slow_load)
    html = client.get("/").content.decode()
    assert "still loading this model" in html and "5M parameters trained on WordNet" in html
    state = client.get("/api/model").json()
    assert state["loading"] is True and state["progress"]["done"] >= 0.25 and state["progress"]["what"]
    release.set()
    model_registry.get_model()
    state = client.get("/api/model").json()
    assert state["loading"] is False and state["ok"] and state["name"] == model_registry.get_model().description.name
