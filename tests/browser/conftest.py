"""A live Daphne on a free loopback port, and Debian's Chromium driven by Playwright."""
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import require
from tests.explainer.live_server import makefile_daphne_limits, migrate
from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium")  # Debian's, on PATH (.ci/run installs it)
HOST_PASSWORD = "workshop-test-password"  # the workshop host page's (tests/browser/test_workshop.py)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def site_url(tmp_path_factory):
    """Daphne serving the site on the bundled model; stopped at the end of the session."""
    yield from serve(tmp_path_factory, os.environ.get("EXPLAINER_TEST_MODEL", "bundled"))


@pytest.fixture(scope="session")
def smollm2_url(tmp_path_factory):
    """Daphne serving the site on SmolLM2-135M-Instruct, the model `make run` serves."""
    yield from serve(tmp_path_factory, "smollm2-135m-instruct", "smollm2")


@pytest.fixture(scope="session")
def one_slot_url(tmp_path_factory):
    """Daphne on the bundled model with one generation slot, where a run whose reader never acks holds it after
    8 messages (EXPLAINER_UNACKED_MAX): a full house on demand (tests/browser/test_start_line.py). No per-address
    cap: the page and the script that holds the slot are both on loopback."""
    yield from serve(tmp_path_factory, "bundled", "one-slot", {"EXPLAINER_MAX_SESSIONS": "1", "EXPLAINER_UNACKED_MAX": "8",
                                                                 "EXPLAINER_MAX_RUNS_PER_ADDRESS": "0"})


def serve(tmp_path_factory, model: str, name: str = "site", extra_env: dict | None = None):
    """Run Daphne with the Makefile's flags on ``model`` until the session ends."""
    port = free_port()
    env = {**os.environ, "EXPLAINER_MODEL": model, "HF_HUB_OFFLINE": "1",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "EXPLAINER_HOST_PASSWORD": HOST_PASSWORD, **(extra_env or {})}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path_factory.mktemp('db') / f'{name}.sqlite3'}"
    migrate(env)
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # each xdist worker running browser tests has its own servers
    log = open(ROOT / f"test-artifacts-daphne{'' if name == 'site' else '-' + name}{'-' + worker if worker else ''}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), *makefile_daphne_limits(),
                             "explainer.asgi:application"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300  # a first SmolLM2 start converts its GGUF
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.terminate()
        pytest.fail(f"daphne did not become healthy; see {log.name}")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:  # a busy server (SmolLM2 mid-forward on a loaded machine)
        proc.kill()
        proc.wait(timeout=20)
    log.close()


@pytest.fixture(scope="session")
def browser():
    require(CHROMIUM, "Debian's chromium on PATH", "apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    yield page
    if getattr(request.node, "failed", False):
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        item.failed = True
        errors = getattr(item.funcargs.get("page"), "errors", None)
        if errors:  # the page's own uncaught errors: a failed wait often starts with one
            report.sections.append(("page errors", "\n".join(errors)))
