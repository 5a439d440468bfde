"""The Daphne that bench/load.py measures: spawned on a free loopback port, or a running one (--url).

Spawned, every measured batch gets a fresh server (after one unmeasured warm-up run of WARMUP_QUESTION), so
the prefix cache holds only what that batch's own visitors and the warm-up computed: the template's system
prompt, which every question shares, and nothing of an earlier batch's questions. With --prefix-cache off the
server keeps no prefixes at all (EXPLAINER_PREFIX_CACHE_BYTES=0).
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WARMUP_QUESTION = "Say hello."  # not one of the measured questions (bench/plain_generate.py QUESTIONS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, most: int, workdir: Path, extra_env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """Daphne on a free loopback port with room for `most` visitors; returns it and its http URL."""
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "explainer.settings", "EXPLAINER_MODEL": args.model,
           "HF_HUB_OFFLINE": "1", "DJANGO_DEBUG": "0",
           "REDIS_URL": "", "EXPLAINER_HOST_PASSWORD": "",  # one plain process: no workers, no workshop pins
           # Room for the previous batch's sockets, which may still be closing when the next batch connects.
           "EXPLAINER_MAX_SESSIONS": str(most), "EXPLAINER_MAX_CONNECTIONS_PER_IP": str(2 * most + 8),
           "EXPLAINER_MAX_RUNS_PER_ADDRESS": "0",  # every simulated visitor comes from 127.0.0.1
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DATABASE_URL": f"sqlite:///{workdir / 'load.sqlite3'}",
           **(extra_env or {})}
    log = open(workdir / "daphne.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0",
                             "explainer.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + args.server_timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                if response.status == 200:  # the model is loaded
                    return proc, url
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    log.close()
    tail = (workdir / "daphne.log").read_text(errors="replace")[-3000:]
    raise SystemExit(f"daphne did not become healthy within {args.server_timeout:.0f} s; its log ends:\n{tail}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Servers:
    """Where each batch runs: a fresh spawned Daphne per batch (prefix cache on or off), or the --url one."""

    def __init__(self, args, workdir: Path, prefix_cache: str = "on"):
        self.args, self.workdir, self.proc = args, workdir, None
        self.extra_env = {} if prefix_cache == "on" else {"EXPLAINER_PREFIX_CACHE_BYTES": "0"}

    async def fresh(self) -> str:
        """The ws URL of a server for the next batch (a new one, when spawning)."""
        if self.args.url:
            return ws_url(self.args.url.rstrip("/"))
        self.close()
        self.proc, url = await asyncio.to_thread(start_server, self.args, max(self.args.batches), self.workdir, self.extra_env)
        self.args.origin = url
        return ws_url(url)

    def close(self) -> None:
        if self.proc is not None:
            stop_server(self.proc)
            self.proc = None


def ws_url(url: str) -> str:
    return url.replace("http", "ws", 1) + "/ws/session/"
