"""A class that presses Play before the workers have loaded the model (issue 25 point 3), in Chromium against
Daphne on Redis with its worker not started yet: the student reads that the class server is starting, Play waits
rather than failing, and the run comes by itself once the worker answers; no operator instruction on screen."""
import contextlib
import os
import shutil
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import HOST_PASSWORD
from tests.browser.test_controls import BANNER, finished
from tests.browser.test_workshop import log_in_as_host, open_context
from tests.conftest import require
from tests.explainer.live_server import migrate
from tests.explainer.test_redis_workers import ROOT, wait_for_port
from tests.support import free_port

STARTING = "The class server is starting (model loading, about 30 s). Your run starts as soon as it is ready."


@pytest.fixture
def workerless_site(tmp_path):
    """redis-server and Daphne in REDIS_URL mode, and a `start_worker()` to call when the test wants the worker."""
    with site_on_redis(tmp_path, {}) as (url, start_worker, _):
        yield url, start_worker


@pytest.fixture
def hosted_site(tmp_path):
    """The same with a host password, and a worker declared lost after 3 s of silence; `kill_worker()` too."""
    with site_on_redis(tmp_path, {"EXPLAINER_HOST_PASSWORD": HOST_PASSWORD, "EXPLAINER_WORKER_TIMEOUT_S": "3"}) as site:
        yield site


@contextlib.contextmanager
def site_on_redis(tmp_path, extra_env: dict):
    redis = require(shutil.which("redis-server"), "redis-server", "apt-get install redis-server")
    redis_port, port = free_port(), free_port()
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "EXPLAINER_MODEL": "bundled",
           "EXPLAINER_WORKER_CHANNELS": "inference-0", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", **extra_env}
    migrate(env)
    log = open(tmp_path / "processes.log", "w")
    procs = [subprocess.Popen([redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=log, stderr=subprocess.STDOUT)]
    wait_for_port(redis_port, procs[0])
    procs.append(subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                   "explainer.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    workers = []

    def start_worker():
        workers.append(subprocess.Popen([sys.executable, "manage.py", "runworker", "inference-0"], cwd=ROOT, env=env,
                                        stdout=log, stderr=subprocess.STDOUT))

    def kill_worker():
        workers[-1].kill()  # SIGKILL: a crash, with no goodbye to anyone
        workers[-1].wait(timeout=15)
    try:
        wait_for_port(port, procs[1])
        yield f"http://127.0.0.1:{port}", start_worker, kill_worker
    finally:
        for proc in procs + workers:
            proc.terminate()
        for proc in procs + workers:
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


def test_a_lost_worker_is_told_to_the_student_in_their_words_and_its_return_to_the_host(browser, hosted_site):
    """A worker dies under a student's paused run: the student reads what happened and what to do (no operator
    detail); the host page names the worker, then says it came back by itself; Play works again."""
    url, start_worker, kill_worker = hosted_site
    start_worker()
    host_context, host = open_context(browser)
    student_context, student = open_context(browser)
    try:
        log_in_as_host(host, url)
        expect(host.locator('[data-stat="workers"]')).to_contain_text("inference-0", timeout=60_000)
        student.goto(url + "/")
        student.locator("input[name=max_new_tokens]").fill("40")
        expect(student.locator("#btn-step")).to_be_enabled(timeout=60_000)
        student.locator("#btn-step").click()  # from idle: start paused, on the worker
        expect(student.locator(BANNER)).to_have_text("Paused after the prefill. Press step.", timeout=60_000)
        kill_worker()
        expect(student.locator(BANNER)).to_contain_text(
            "The class server restarted part of itself, the part running your run. Press Play again.", timeout=30_000)
        expect(host.locator("#workers-warning")).to_contain_text("Not answering: inference-0", timeout=30_000)
        start_worker()  # what the Procfile does by itself under make workshop
        expect(host.locator("#workers-warning")).to_have_text(
            "inference-0 came back by itself: students press Play again.", timeout=90_000)
        student.locator("input[name=max_new_tokens]").fill("4")
        student.locator("#btn-play").click()
        reason, steps = finished(student)
        assert steps >= 1, (reason, steps)
        text = student.locator("body").inner_text()
        assert "runworker" not in text and "inference-0" not in text  # the operator's detail is the host's
        assert not student.errors and not host.errors, (student.errors, host.errors)
    finally:
        student_context.close()
        host_context.close()
