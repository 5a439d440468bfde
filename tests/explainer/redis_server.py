"""A real redis-server on a free loopback port, for the tests that need processes to share Redis."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from contextlib import contextmanager

from tests.conftest import require
from tests.support import free_port  # noqa: F401 (imported from here by the redis tests)


def redis_binary() -> str:
    """redis-server's path; missing is a failure in CI (it installs it) and a skip on a laptop without it."""
    return require(shutil.which("redis-server"), "redis-server", "apt-get install redis-server")


@contextmanager
def redis_server():
    """Yield redis://127.0.0.1:<port>/0 while a throwaway redis-server (no persistence) runs."""
    port = free_port()
    proc = subprocess.Popen([redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
