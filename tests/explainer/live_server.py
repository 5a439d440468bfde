"""A real Daphne in a subprocess on a free loopback port, started with the Makefile's limits."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support import ORIGIN, free_port  # noqa: F401 (ORIGIN: imported from here by other test modules)

ROOT = Path(__file__).resolve().parents[2]


def migrate(env: dict) -> None:
    """Create the database a test server will use (env's DATABASE_URL). --skip-checks: Django's system checks import
    the URL configuration and through it torch, 3.0 s of CPU a migrate against 0.7 s without them."""
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks"], cwd=ROOT, env=env, check=True,
                   capture_output=True)


def makefile_daphne_limits() -> list[str]:
    """The Daphne flags `make run` passes (DAPHNE_LIMITS), so the tests run what production runs."""
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("DAPHNE_LIMITS"):
            return shlex.split(line.split("=", 1)[1])
    raise AssertionError("the Makefile has no DAPHNE_LIMITS line")


def daphne_flag(name: str) -> str:
    """One flag's value from DAPHNE_LIMITS."""
    flags = makefile_daphne_limits()
    return flags[flags.index(name) + 1]


@dataclass
class LiveServer:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        """The Origin of this server's own pages (scheme, host and port: explainer/origins.py)."""
        return self.url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/session/"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate if still running (a test may have signalled it already)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_daphne(tmp_path: Path, model: str, env: dict | None = None, ready_timeout_s: float = 180) -> LiveServer:
    """Daphne serving the site on `model`, healthy (model loaded) when this returns."""
    port = free_port()
    full_env = {**os.environ, "EXPLAINER_MODEL": model, "HF_HUB_OFFLINE": "1", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DATABASE_URL": f"sqlite:///{tmp_path / 'live.sqlite3'}", "OMP_NUM_THREADS": "1",
                "EXPLAINER_DEVICE": "cpu", **(env or {})}  # the CPU unless a test asks: its figures mean the CPU
    log_path = tmp_path / "daphne.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), *makefile_daphne_limits(),
                                 "explainer.asgi:application"], cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    server = LiveServer(proc, port, log_path)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"daphne exited with {proc.returncode}:\n{server.log()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/healthz", timeout=5) as response:
                if response.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    server.stop()
    raise AssertionError(f"daphne did not become healthy:\n{server.log()[-3000:]}")
