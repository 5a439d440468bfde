"""What an embed downloads: a 20-token SmolLM2 run served by the slice each section draws (issue 27, point 1)."""
import gzip
import json

import pytest
from django.test import Client

from explainer.embeds import SECTIONS
from explainer.management.commands import record_examples
from explainer.models import RecordedRun
from explainer.services import slices

MESSAGES = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
PARAMS = {"temperature": 0.7, "seed": 0, "max_new_tokens": 20}
DICE_BUDGET = 60_000  # bytes on the wire for one <he-dice>'s data (the issue's target)


@pytest.fixture(scope="module")
def smollm2_payloads():
    """Every payload of a real 20-token SmolLM2 run as the page saves it (the live run's logit lens, the checks)."""
    return record_examples.record(record_examples.load_example_model(), MESSAGES, PARAMS, lens="auto")["payloads"]


@pytest.fixture
def run_id(db, smollm2_payloads):
    return RecordedRun.objects.create(model_spec="smollm2-135m-instruct", messages=MESSAGES, params=PARAMS, seed=0,
                                      schema_version=smollm2_payloads[0]["schema_version"], payloads=smollm2_payloads).pk


def wire_bytes(client, url) -> tuple[int, dict]:
    """(bytes transferred gzipped, the JSON) of a GET as a browser asks for it."""
    response = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Encoding"] == "gzip"
    return len(response.content), json.loads(gzip.decompress(response.content))


@pytest.mark.django_db
def test_each_section_downloads_only_what_it_draws(run_id):
    client = Client()
    full_bytes, full = wire_bytes(client, f"/api/runs/{run_id}")
    assert sum(p["type"] == "step" for p in full["payloads"]) == 20
    sizes = {}
    for section in SECTIONS:
        sizes[section], data = wire_bytes(client, f"/api/runs/{run_id}/{section}")
        assert data["slice"]["section"] == section and section in data["slice"]["draws"]
        assert [p["type"] for p in data["payloads"]] == [p["type"] for p in full["payloads"]]  # every payload kept
        assert sizes[section] < full_bytes, section
    assert sizes["dice"] <= DICE_BUDGET, sizes
    assert sizes["attention"] <= full_bytes and sizes["dice"] * 5 < full_bytes, sizes  # the attention weights stay out
    print({"full": full_bytes, **sizes})


@pytest.mark.django_db
def test_a_slice_keeps_the_counts_other_diagrams_quote_and_drops_the_weights(run_id):
    dice = Client().get(f"/api/runs/{run_id}/dice").json()
    attention = Client().get(f"/api/runs/{run_id}/attention").json()
    step, whole = dice["payloads"][3], attention["payloads"][3]
    assert step["attention"]["keys"] == whole["attention"]["keys"]
    assert not any(isinstance(v, (dict, list)) for v in step["attention"].values()), step["attention"]  # no weights
    assert step["kv"]["seq_len"] == whole["kv"]["seq_len"] and "layers" not in step["kv"]
    assert "stages" not in step and "lens" not in step and whole["attention"]["heads"]["b64"]
    assert step["probs"] == whole["probs"] and step["draw"] == whole["draw"]  # what the dice draws, whole
    assert dice["slice"]["draws"] == [s for s in SECTIONS if s not in ("attention", "layers", "stages", "filter", "kv", "kvcalc", "context")]


@pytest.mark.django_db
def test_slices_are_cached_for_good_and_shared_with_other_sites(run_id):
    response = Client().get(f"/api/runs/{run_id}/dice")
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    from explainer.cors import is_shared
    assert is_shared(f"/api/runs/{run_id}/dice") and is_shared("/api/examples/biopsy/attention")
    assert not is_shared(f"/api/runs/{run_id}/dice/more")


@pytest.mark.django_db
def test_an_unknown_section_or_run_is_a_named_404(run_id):
    client = Client()
    response = client.get(f"/api/runs/{run_id}/dices")
    assert response.status_code == 404 and response.json()["error"]["field"] == "section"
    assert "dice" in response.json()["error"]["message"]
    assert client.get("/api/runs/nothere/dice").json()["error"]["code"] == "not_found"
    assert client.get("/api/examples/nothere/dice").status_code == 404


def test_a_shipped_example_is_sliced_the_same_way():
    client = Client()
    data = client.get("/api/examples/biopsy/dice").json()
    shipped = json.loads(open("static/examples/biopsy.json", encoding="utf-8").read())
    assert data == slices.slice_recording(shipped, "dice", SECTIONS)


def test_a_split_message_is_joined_before_it_is_sliced():
    from inference.wire.framing import split_message
    step = {"type": "step", "step": 1, "attention": {"keys": 4, "top_weights": ["x" * 400] * 40}, "probs": [{"id": 1}]}
    frames = split_message(step, 4096)
    assert len(frames) > 1
    out = slices.joined([{"type": "session"}, *frames, {"type": "done"}])
    assert [p["type"] for p in out] == ["session", "step", "done"]
    assert slices.sliced_payload(out[1], "dice") == {"type": "step", "step": 1, "attention": {"keys": 4}, "probs": [{"id": 1}]}
