"""`make workshop`: a class on one machine. Redis (its own, unless REDIS_URL is given), WORKERS inference
workers and the Daphne process(es), all from docs/deploy/Procfile under honcho, all with the same settings.

honcho starts and stops them together: Ctrl-C stops every one. The host's password (generated unless
EXPLAINER_HOST_PASSWORD is set) and a one-time login link are printed first (docs/deploy.md).
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from explainer import lan
from explainer.services.workshop import policy
from explainer.services.workshop.console import Console, follow

PROCFILE = Path(settings.BASE_DIR) / "docs" / "deploy" / "Procfile"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def workshop_env(port: int, workers: int, daphnes: int, environ: dict) -> tuple[dict, dict]:
    """The environment every process shares, and honcho's concurrency (how many of each Procfile line)."""
    env = dict(environ)
    urls = lan.class_urls(env.get("BIND", "127.0.0.1"), port, env)
    env["EXPLAINER_CLASS_URLS"] = ",".join(urls)  # the host page shows them, with a QR code
    # The LAN addresses are allowed hosts for this run only: students type them, and Django refuses others.
    hosts = [h for h in env.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h.strip()]
    env["DJANGO_ALLOWED_HOSTS"] = ",".join(dict.fromkeys(hosts + [urlsplit(u).hostname for u in urls]))
    own_redis = not env.get("REDIS_URL")
    if own_redis:
        env["EXPLAINER_REDIS_PORT"] = str(free_port())
        env["REDIS_URL"] = f"redis://127.0.0.1:{env['EXPLAINER_REDIS_PORT']}/0"
    env.setdefault("EXPLAINER_HOST_PASSWORD", secrets.token_urlsafe(9))
    env["EXPLAINER_HOST_LINK_TOKEN"] = secrets.token_urlsafe(24)
    env["EXPLAINER_WORKER_CHANNELS"] = ",".join(f"inference-{i}" for i in range(workers))
    env.setdefault("EXPLAINER_DEVICE", "auto")
    # A classroom often reaches the server from one address (NAT): no per-address connection cap unless set.
    env.setdefault("EXPLAINER_MAX_CONNECTIONS_PER_IP", "0")
    env.setdefault("EXPLAINER_MAX_RUNS_PER_ADDRESS", "0")  # nor a cap on one address's generation slots
    env["PORT"] = str(port)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the Procfile's python, daphne
    return env, {"redis": int(own_redis), "worker": workers, "web": daphnes}


class Command(BaseCommand):
    help = "Run a workshop on this machine: Redis, inference workers and Daphne under honcho (Ctrl-C stops all)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--workers", type=int, default=int(os.environ.get("WORKERS", "2")))
        parser.add_argument("--daphnes", type=int, default=int(os.environ.get("DAPHNES", "1")))
        parser.add_argument("--host", default=os.environ.get("BIND", "127.0.0.1"),
                            help="the address Daphne listens on (0.0.0.0 for a room on a LAN)")

    def handle(self, *args, port, workers, daphnes, host, **options):
        if workers < 1 or daphnes < 1:
            raise CommandError("WORKERS and DAPHNES must be at least 1")
        honcho = shutil.which("honcho", path=str(Path(sys.executable).parent)) or shutil.which("honcho")
        if honcho is None:
            raise CommandError("honcho is not installed: pip install -r requirements.txt")
        env, concurrency = workshop_env(port, workers, daphnes, {**os.environ, "BIND": host})
        if concurrency["redis"] and shutil.which("redis-server") is None:
            raise CommandError("redis-server is not installed (apt-get install redis-server), or give REDIS_URL")
        call_command("migrate", "--noinput", verbosity=0)
        cleared = self.fresh_class()
        log_path = Path(env.get("EXPLAINER_WORKSHOP_LOG") or Path(settings.BASE_DIR) / "workshop.log").resolve()
        banner = self.banner(env, port, workers, daphnes, concurrency["redis"])
        self.stdout.write(banner + cleared + f"Starting: the workers are loading the model (Redis, Daphne and workers log to {log_path}).\n")
        self.stdout.flush()
        started = time.monotonic()
        noun = "worker" if workers == 1 else "workers"
        ready = lambda: (f"Ready: {workers} {noun}, model {settings.EXPLAINER_MODEL}, in {time.monotonic() - started:.0f} s. "  # noqa: E731
                         "Students can start now.\n" + banner)
        spec = ",".join(f"{name}={n}" for name, n in concurrency.items())
        command = [honcho, "start", "-f", str(PROCFILE), "-d", str(settings.BASE_DIR), "-p", str(port), "-c", spec]
        code = follow(command, env, Path(settings.BASE_DIR), log_path, Console(self.stdout, workers, daphnes, ready))
        if code:
            raise SystemExit(code)

    def fresh_class(self) -> str:
        """Clear what the last class left in the database; a line saying what was cleared, if anything."""
        left = policy.fresh_class()
        kept = [name for name, value in (("broadcast", left["broadcast"]), ("pins", left["pins"]),
                                         ("limits", left["limits"] != policy.NO_LIMITS)) if value]
        if not kept:
            return ""
        listed = kept[0] if len(kept) == 1 else ", ".join(kept[:-1]) + " and " + kept[-1]
        return f"A fresh class: the last class's {listed} {'is' if kept == ['broadcast'] else 'are'} cleared.\n"

    def banner(self, env: dict, port: int, workers: int, daphnes: int, own_redis: bool) -> str:
        """What the teacher needs: the students' URL (with a QR code), the host page, password and link."""
        urls = [u for u in env["EXPLAINER_CLASS_URLS"].split(",") if u]
        here = f"http://127.0.0.1:{port}/"
        lines = [f"Workshop: {workers} inference worker{'' if workers == 1 else 's'}, {daphnes} Daphne, model {settings.EXPLAINER_MODEL}, Redis "
                 f"{env['REDIS_URL']}{' (its own)' if own_redis else ''}"]
        if not urls:
            lines.append("No LAN address found on this machine: students cannot reach it (connect to the room's "
                         "network, or set EXPLAINER_LAN_ADDRESSES).")
        elif urls == [here]:
            lines.append(f"Students: {here} (this machine only; BIND=0.0.0.0 serves the LAN)")
        else:
            lines += [f"Students open: {url}   (short: {lan.short_form(url)})" for url in urls]
            lines.append(lan.qr_terminal(urls[0]).rstrip("\n"))
        host = (urls or [here])[0]
        lines += [f"Host page: {host}host/  password: {env['EXPLAINER_HOST_PASSWORD']}",
                  f"One-time host login link (works past a lockout): {host}host/?link={env['EXPLAINER_HOST_LINK_TOKEN']}",
                  "Ctrl-C stops everything.", ""]
        return "\n".join(lines)
