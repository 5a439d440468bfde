"""The Django project is wired for Channels: checks pass, daphne leads, ASGI routes both protocols."""
import subprocess
import sys
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


def test_manage_py_check_passes():
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_daphne_comes_before_staticfiles():
    apps = settings.INSTALLED_APPS
    assert apps.index("daphne") < apps.index("django.contrib.staticfiles")
    assert apps[0] == "daphne"


def test_asgi_application_routes_http_and_websocket():
    from channels.routing import ProtocolTypeRouter

    from explainer.asgi import application

    assert isinstance(application, ProtocolTypeRouter)
    assert {"http", "websocket"} <= set(application.application_mapping)
