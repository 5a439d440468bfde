"""Hardening, round two (issue 16): recordings checked all the way down, safe defaults, no 500 from bad
paths, headers on static files."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.testing import HttpCommunicator
from django.test import Client

from explainer.asgi import application
from explainer.models import RecordedRun
from tests.explainer.test_recordings import body, post, recorded_payloads  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[2]
HOST = [(b"host", b"127.0.0.1")]


async def asgi_get(path: str) -> dict:
    """A request through the whole ASGI application (CORS wrapper, static files, Django), as Daphne sends it."""
    return await HttpCommunicator(application, "GET", path, headers=HOST).get_response(timeout=20)


def header(response: dict, name: bytes) -> bytes | None:
    return next((v for k, v in response["headers"] if k.lower() == name), None)


# ---- recordings ------------------------------------------------------------------------------------------

def broken_copies(recorded):
    """Recordings whose payloads look right at the top level but not inside."""
    def edited(n, **fields):
        payloads = json.loads(json.dumps(recorded))
        payloads[n].update(fields)
        return payloads
    yield "model replaced", edited(0, model={"items": "x"})
    yield "model field of the wrong type", edited(0, model={**recorded[0]["model"], "layers": "two"})
    yield "model with an extra key", edited(0, model={**recorded[0]["model"], "items": "x"})
    packed = edited(1)
    packed[1]["hidden_norms"] = {"dtype": 3, "shape": [1], "b64": ""}
    yield "packed dtype not a string", packed
    shaped = edited(1)
    shaped[1]["hidden_norms"] = {**shaped[1]["hidden_norms"], "shape": ["x"]}
    yield "packed shape not integers", shaped
    yield "tokens not objects", edited(1, tokens=["x"])
    check = next(n for n, p in enumerate(recorded) if p["type"] == "check")
    yield "check payload without data", edited(check, data="x")


@pytest.mark.django_db
def test_recordings_with_bad_nested_payloads_are_refused(client, recorded_payloads):
    for name, payloads in broken_copies(recorded_payloads):
        response = post(client, body(payloads))
        assert response.status_code == 400, name
        assert response.json()["error"]["code"] == "invalid_payload", name
        assert response.json()["error"]["field"].startswith("payloads["), name
    assert post(client, body(recorded_payloads)).status_code == 201  # the control: the real run is kept


@pytest.mark.django_db
def test_a_broken_stored_recording_gets_a_named_page_not_a_500(recorded_payloads):
    payloads = json.loads(json.dumps(recorded_payloads))
    payloads[0]["model"] = {"items": "x"}
    run = RecordedRun.objects.create(model_spec="x", messages=[], params={}, seed=1, schema_version=1, payloads=payloads)
    browser = Client(raise_request_exception=False)
    page = browser.get(f"/runs/{run.id}")
    assert page.status_code == 422 and b"broken_recording" in page.content and b"cannot be replayed" in page.content
    api = browser.get(f"/api/runs/{run.id}")
    assert api.status_code == 422 and api.json()["error"]["code"] == "broken_recording"


# ---- safe defaults ---------------------------------------------------------------------------------------

def setting_in_a_fresh_process(name: str, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    code = f"import django; django.setup(); from django.conf import settings; print(settings.{name})"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**clean, "DJANGO_SETTINGS_MODULE": "explainer.settings", **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_debug_is_off_unless_asked_for():
    assert setting_in_a_fresh_process("DEBUG") == "False"
    assert setting_in_a_fresh_process("DEBUG", DJANGO_DEBUG="1") == "True"


async def test_static_files_are_served_with_debug_off_and_carry_the_headers(settings):
    settings.DEBUG = False
    response = await asgi_get("/static/css/site.css")
    assert response["status"] == 200 and b"{" in response["body"]
    assert header(response, b"x-content-type-options") == b"nosniff"
    policy = header(response, b"content-security-policy")
    assert policy and b"default-src 'none'" in policy and b"frame-ancestors 'none'" in policy


@pytest.mark.parametrize("path", ["/static/../explainer/settings.py", "/static/%2e%2e/explainer/settings.py",
                                  "/static/..%2fexplainer/settings.py", "/static//etc/passwd", "/static/css/../../manage.py"])
async def test_paths_out_of_static_are_404_without_a_traceback(path, caplog):
    with caplog.at_level(logging.DEBUG):
        response = await asgi_get(path)
    assert response["status"] == 404
    assert b"DEBUG" not in response["body"] and b"SECRET" not in response["body"]
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
