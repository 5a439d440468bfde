"""Recorded runs: record a real run, replay it through the API byte for byte, and keep old recordings working."""
import copy
import json

import pytest
from django.test import Client

from explainer.models import RecordedRun
from explainer.services.run import after_run_checks
from explainer.services.recordings import RecordingError, upgrade
from inference.wire.upgrades import _v0_to_v1, _v1_to_v2
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.wire.schema import SCHEMA_VERSION, validate_payload
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from tests.support import STORIES, stories_spec

MESSAGES = [{"role": "user", "content": "<t403> <t407>"}]
PARAMS = {"temperature": 0.8, "seed": 1, "max_new_tokens": 5}


@pytest.fixture(scope="module")
def recorded_payloads():
    """Every payload of one real run on stories260K, in the order the socket sends them."""
    loaded = load_model(stories_spec(), device="cpu")
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=[1, 403, 407]), SamplingParams(**PARAMS))
    payloads = [session.session_payload(), session.prefill(), after_run_checks.causal_mask(session)]
    while not session.finished:
        payloads.append(session.step())
    payloads.append(session.done_payload())
    return json.loads(json.dumps(payloads))  # what a browser would send: plain JSON


def body(recorded, **over):
    return {"messages": MESSAGES, "params": PARAMS, "seed": 1, "model_spec": str(STORIES), "payloads": recorded, **over}


def post(client, data, **extra):
    raw = data if isinstance(data, (str, bytes)) else json.dumps(data)
    return client.post("/api/runs", raw, content_type="application/json", **extra)


def csrf_client():
    """A browser-like client: CSRF enforced, token from the csrftoken cookie sent in X-CSRFToken."""
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = token = "a" * 32
    return browser, token


@pytest.mark.django_db
def test_record_then_replay_yields_identical_payloads(recorded_payloads):
    kinds = [p["type"] for p in recorded_payloads]
    assert kinds[:3] == ["session", "prefill", "check"] and kinds[-1] == "done" and kinds.count("step") == 5
    browser, token = csrf_client()
    refused = post(browser, body(recorded_payloads))
    assert refused.status_code == 403  # no X-CSRFToken: Django's CSRF middleware refuses it
    assert RecordedRun.objects.count() == 0
    created = post(browser, body(recorded_payloads), HTTP_X_CSRFTOKEN=token)
    assert created.status_code == 201, created.content
    run_id = created.json()["id"]
    assert created.json()["url"] == f"/runs/{run_id}"

    replay = Client().get(f"/api/runs/{run_id}")
    assert replay.status_code == 200
    got = replay.json()
    assert got["payloads"] == recorded_payloads
    assert (got["messages"], got["params"], got["seed"], got["model_spec"]) == (MESSAGES, PARAMS, 1, str(STORIES))
    assert got["schema_version"] == SCHEMA_VERSION
    for p in got["payloads"]:
        validate_payload(p)
    assert RecordedRun.objects.get(pk=run_id).steps == 5


@pytest.mark.django_db
def test_ids_are_unguessable(client, recorded_payloads):
    ids = [post(client, body(recorded_payloads)).json()["id"] for _ in range(2)]
    assert all(len(i) >= 20 for i in ids)
    assert ids[0] != ids[1]
    prefix = next(n for n, (a, b) in enumerate(zip(*ids)) if a != b)
    assert prefix < 6  # unrelated, not a counter or a timestamp
    assert not any(i.isdigit() for i in ids)


@pytest.mark.django_db
def test_replay_page_exposes_the_run_id(client, recorded_payloads):
    run_id = post(client, body(recorded_payloads)).json()["id"]
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-run-id="{run_id}"' in html
    assert "stories260K" in html
    assert "<script>" not in html  # no inline script: the module reads data-run-id
    assert client.get("/runs/no-such-run-id-at-all-here").status_code == 404


@pytest.mark.django_db
def test_unknown_id_is_a_json_404(client):
    response = client.get("/api/runs/does-not-exist-0123456789")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.django_db
def test_recordings_are_immutable(client, recorded_payloads):
    run_id = post(client, body(recorded_payloads)).json()["id"]
    for method in ("put", "patch", "delete"):
        assert getattr(client, method)(f"/api/runs/{run_id}").status_code == 405
    assert client.get("/api/runs").status_code == 405
    run = RecordedRun.objects.get(pk=run_id)
    with pytest.raises(ValueError):
        run.save()


def broken(payloads, index, change):
    out = copy.deepcopy(payloads)
    change(out[index])
    return out


@pytest.mark.django_db
@pytest.mark.parametrize("make, code, field", [
    (lambda p: "{not json", "bad_json", None),
    (lambda p: [1, 2], "bad_json", None),
    (lambda p: {k: v for k, v in body(p).items() if k != "seed"}, "missing_field", "seed"),
    (lambda p: body(p, seed="1"), "wrong_type", "seed"),
    (lambda p: body(p, seed=True), "wrong_type", "seed"),
    (lambda p: body(p, params=[1]), "wrong_type", "params"),
    (lambda p: body(p, model_spec=""), "wrong_type", "model_spec"),
    (lambda p: body(p, messages=[{"role": "user"}]), "wrong_type", "messages[0]"),
    (lambda p: body(p, messages="hi"), "wrong_type", "messages"),
    (lambda p: body(p, payloads={}), "wrong_type", "payloads"),
    (lambda p: body(p, payloads=[p[0], "x", *p[1:]]), "wrong_type", "payloads[1]"),
    (lambda p: body(p, payloads=[p[0], {"type": "nope", "schema_version": 1}, *p[1:]]), "unknown_type", "payloads[1].type"),
    (lambda p: body(p, payloads=broken(p, 3, lambda s: s.pop("token"))), "invalid_payload", "payloads[3]"),
    (lambda p: body(p, payloads=broken(p, 1, lambda s: s["kv"].update(seq_len="3"))), "invalid_payload", "payloads[1]"),
    (lambda p: body(p, payloads=p[1:]), "invalid_value", "payloads"),
    (lambda p: body(p, payloads=[{**x, "schema_version": SCHEMA_VERSION + 1} for x in p]), "unsupported_schema", "schema_version"),
])
def test_bad_bodies_are_named_400s(client, recorded_payloads, make, code, field):
    response = post(client, make(recorded_payloads))
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["field"] == field
    assert RecordedRun.objects.count() == 0


@pytest.mark.django_db
def test_size_cap(client, settings, recorded_payloads):
    settings.EXPLAINER_MAX_RECORDING_BYTES = 1000
    response = post(client, body(recorded_payloads))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def version0(payloads):
    """The same run as a schema-0 server would have sent it: no kv.stored_tokens."""
    old = copy.deepcopy(payloads)
    for p in old:
        p["schema_version"] = 0
        if "kv" in p:
            del p["kv"]["stored_tokens"]
    return old


def test_v0_recording_upgrades_stored_tokens_from_seq_len(recorded_payloads):
    old = version0(recorded_payloads)
    with pytest.raises(AssertionError):
        validate_payload(old[1])  # stored_tokens is missing
    assert _v0_to_v1({"type": "step", "kv": {"seq_len": 7}})["kv"]["stored_tokens"] == 7
    assert _v1_to_v2({"type": "step", "step": 3})["batch_size"] == 1  # before batching: a pass of its own
    new = upgrade(old, 0)
    assert new == recorded_payloads  # stories260K has no sliding window: stored == seen
    assert all(p["kv"]["stored_tokens"] == p["kv"]["seq_len"] for p in new if "kv" in p)
    assert "stored_tokens" not in old[1]["kv"]  # the stored recording is not modified
    assert upgrade(recorded_payloads, SCHEMA_VERSION) is recorded_payloads  # current: identity
    with pytest.raises(RecordingError) as exc:
        upgrade(recorded_payloads, SCHEMA_VERSION + 1)
    assert exc.value.code == "unsupported_schema"


@pytest.mark.django_db
def test_v0_recording_is_accepted_and_served_upgraded(client, recorded_payloads):
    created = post(client, body(version0(recorded_payloads)))
    assert created.status_code == 201, created.content
    run = RecordedRun.objects.get(pk=created.json()["id"])
    assert run.schema_version == 0  # stored as recorded
    got = client.get(f"/api/runs/{run.id}").json()
    assert got["recorded_schema_version"] == 0 and got["schema_version"] == SCHEMA_VERSION
    assert got["payloads"] == recorded_payloads


def test_database_url_is_parsed_without_new_dependencies():
    from explainer.settings import database_from_url

    db = database_from_url("postgres://he:p%40ss@db.local:5433/hitenter")
    assert db == {"ENGINE": "django.db.backends.postgresql", "NAME": "hitenter", "USER": "he", "PASSWORD": "p@ss",
                  "HOST": "db.local", "PORT": "5433"}
    assert database_from_url("sqlite:////tmp/he.db") == {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/he.db"}
    with pytest.raises(ValueError):
        database_from_url("mysql://x@y/z")


@pytest.mark.django_db
def test_admin_lists_runs(admin_client, recorded_payloads):
    run_id = post(admin_client, body(recorded_payloads)).json()["id"]
    page = admin_client.get("/admin/explainer/recordedrun/")
    assert page.status_code == 200
    assert run_id in page.content.decode()
