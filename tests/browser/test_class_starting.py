"""A class that presses Play before the workers have loaded the model (issue 25 point 3), in Chromium against
Daphne on Redis with its worker not started yet: the student reads that the class server is starting, Play waits
rather than failing, and the run comes by itself once the worker answers; no operator instruction on screen."""
import os
import shutil
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.browser.test_controls import BANNER, finished
from tests.conftest import require
from tests.explainer.test_redis_workers import ROOT, wait_for_port
from tests.support import free_port

STARTING = "The class server is starting (model loading, about 30 s). Your run starts as soon as it is ready."


@pytest.fixture
def workerless_site(tmp_path):
    """redis-server and Daphne in REDIS_URL mode, and a `start_worker()` to call when the test wants the worker."""
    redis = require(shutil.which("redis-server"), "redis-server", "apt-get install redis-server")
    redis_port, port = free_port(), free_port()
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "EXPLAINER_MODEL": "bundled",
           "EXPLAINER_WORKER_CHANNELS": "inference-0", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
    log = open(tmp_path / "processes.log", "w")
    procs = [subprocess.Popen([redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=log, stderr=subprocess.STDOUT)]
    wait_for_port(redis_port, procs[0])
    procs.append(subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                   "explainer.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))

    def start_worker():
        procs.append(subprocess.Popen([sys.executable, "manage.py", "runworker", "inference-0"], cwd=ROOT, env=env,
                                      stdout=log, stderr=subprocess.STDOUT))
    try:
        wait_for_port(port, procs[1])
        yield f"http://127.0.0.1:{port}", start_worker
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_play_before_the_workers_are_ready_waits_and_says_so(page, workerless_site):
    url, start_worker = workerless_site
    page.goto(url + "/")
    expect(page.locator("#btn-play")).to_be_enabled(timeout=60_000)
    page.locator("#messages textarea").first.fill("What is a mole?")
    page.locator("input[name=max_new_tokens]").fill("4")
    page.locator("#btn-play").click()
    expect(page.locator(BANNER)).to_have_text(STARTING, timeout=30_000)
    expect(page.locator(BANNER)).to_have_attribute("data-kind", "info")  # news, not an error
    start_worker()  # the model has loaded: the run starts with no second press
    reason, steps = finished(page)
    assert steps >= 1, (reason, steps)
    text = page.locator("body").inner_text()
    assert "runworker" not in text and "docs/deploy.md" not in text  # operator instructions stay in the log
    assert not page.errors, page.errors
