"""Hardening, round two (issue 16): recordings checked all the way down, safe defaults, no 500 from bad
paths, headers on static files."""
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.testing import HttpCommunicator

from explainer.asgi import application

REPO = Path(__file__).resolve().parents[2]
HOST = [(b"host", b"127.0.0.1")]


async def asgi_get(path: str) -> dict:
    """A request through the whole ASGI application (CORS wrapper, static files, Django), as Daphne sends it."""
    return await HttpCommunicator(application, "GET", path, headers=HOST).get_response(timeout=20)


def header(response: dict, name: bytes) -> bytes | None:
    return next((v for k, v in response["headers"] if k.lower() == name), None)


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
