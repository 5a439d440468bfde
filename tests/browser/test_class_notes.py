"""What a following student reads when the host's run ends without the host pressing Stop (issue 25 points 4 and 5),
in Chromium, caused the way a class causes it: the host closes the laptop (EXPLAINER_HOST_GONE_S=0: at once), or the
server is stopped mid-class and started again on the same database (Ctrl-C, then `make run` again)."""
import os
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import HOST_PASSWORD
from tests.browser.test_workshop import log_in_as_host, open_context
from tests.explainer.live_server import ROOT, makefile_daphne_limits, migrate
from tests.explainer.test_redis_workers import wait_for_port
from tests.support import free_port

HOST_LEFT = "The host's run has ended: the host left the class."
RESTARTED = "The host's run has ended: the class server restarted. The host's next run shows here by itself."


class Site:
    """Daphne on the bundled model, on one port and one database for its whole life (restarts included)."""

    def __init__(self, tmp_path, **env):
        self.port = free_port()
        self.env = {**os.environ, "EXPLAINER_MODEL": "bundled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "EXPLAINER_HOST_PASSWORD": HOST_PASSWORD,
                    "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", **env}
        migrate(self.env)
        self.log = open(tmp_path / "daphne.log", "a")
        self.proc = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "Site":
        self.proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
                                      *makefile_daphne_limits(), "explainer.asgi:application"],
                                     cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.proc)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


@pytest.fixture
def site(tmp_path, request):
    site = Site(tmp_path, **getattr(request, "param", {}))
    try:
        yield site.start()
    finally:
        site.stop()


def paused_broadcast_followed(browser, url):
    """A host's page with a paused broadcast, and a student's page following it."""
    host_context, host = open_context(browser)
    student_context, student = open_context(browser)
    log_in_as_host(host, url)
    student.goto(url + "/")
    host.locator('#broadcast-form input[name="paused"]').check()
    host.locator("#btn-broadcast").click()
    student.locator("#workshop-banner button", has_text="Follow the host").click()
    expect(student.locator("#workshop-banner")).to_contain_text("Following the host's run")
    expect(student.locator("#status-banner")).to_contain_text("Paused after the prefill", timeout=60_000)
    return (host_context, host), (student_context, student)


@pytest.mark.parametrize("site", [{"EXPLAINER_HOST_GONE_S": "0"}], indirect=True)
def test_the_host_closing_their_page_ends_the_run_and_the_student_is_told(browser, site):
    (host_context, _), (student_context, student) = paused_broadcast_followed(browser, site.url)
    try:
        host_context.close()  # the laptop lid
        expect(student.locator("#workshop-banner")).to_contain_text(HOST_LEFT, timeout=30_000)
        expect(student.locator("#workshop-banner")).not_to_contain_text("The host is broadcasting")
        assert not student.errors, student.errors
    finally:
        student_context.close()


def test_a_server_restarted_mid_class_ends_the_run_and_the_student_is_told(browser, site):
    (host_context, _), (student_context, student) = paused_broadcast_followed(browser, site.url)
    try:
        site.stop()  # Ctrl-C mid-class; the broadcast stays stored as paused in the database
        site.start()  # the page reconnects by itself to the new process, which never ran that broadcast
        expect(student.locator("#workshop-banner")).to_contain_text(RESTARTED, timeout=60_000)
        text = student.locator("body").inner_text()
        assert "Traceback" not in text and "server_restarted" not in text  # words for a student, not a code
    finally:
        student_context.close()
        host_context.close()
