"""docs/deploy/nginx.conf stops slow clients before Daphne (issue 22, N5): Debian's nginx runs the shipped site on
loopback ports, in front of a stub upstream that counts the requests it gets.

The copy under test only swaps what a test cannot use (TLS, ports, the upstream's addresses) and shortens the
two timeouts and the connection cap so the test is quick; test_the_shipped_limits reads the shipped values."""
import re
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import require
from tests.explainer.live_server import ROOT
from tests.support import free_port

CONF = ROOT / "docs" / "deploy" / "nginx.conf"
TIMEOUT_S = 2  # in place of the shipped 10s
PER_ADDRESS = 4  # in place of the shipped limit_conn


def test_the_shipped_limits():
    site = CONF.read_text()
    assert re.search(r"^\s*client_header_timeout 10s;", site, re.M)
    assert re.search(r"^\s*client_body_timeout 10s;", site, re.M)
    zone = re.search(r"^limit_conn_zone \$binary_remote_addr zone=(\w+):\d+m;", site, re.M)
    assert zone and re.search(rf"^\s*limit_conn {zone.group(1)} \d+;", site, re.M)


class Upstream(BaseHTTPRequestHandler):
    """Daphne's stand-in: /slow answers after 1.5 s (a request in progress), anything else at once."""

    seen: list[str] = []

    def do_GET(self):
        Upstream.seen.append(self.path)
        if self.path == "/slow":
            time.sleep(1.5)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def loopback_config(site: str, port: int, upstream: int, tmp) -> str:
    """The shipped site on loopback, without TLS, inside the minimal main config nginx needs to run unprivileged."""
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{port};")
    site = re.sub(r"^\s*ssl_certificate.*\n", "", site, flags=re.M)
    site = re.sub(r"server 127\.0\.0\.1:800\d;", f"server 127.0.0.1:{upstream};", site)
    site = site.replace("listen 80;", f"listen 127.0.0.1:{free_port()};")
    site = re.sub(r"(client_(?:header|body)_timeout) 10s;", rf"\1 {TIMEOUT_S}s;", site)
    site = re.sub(r"(limit_conn \w+) \d+;", rf"\1 {PER_ADDRESS};", site)
    temps = "".join(f"{name}_temp_path {tmp}/{name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log info;\nevents {{ worker_connections 256; }}\n"
            f"http {{\naccess_log off;\n{temps}{site}\n}}\n")


@pytest.fixture
def nginx(tmp_path):
    binary = require(shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin"), "nginx", "apt-get install nginx")
    Upstream.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(loopback_config(CONF.read_text(), port, upstream.server_address[1], tmp_path))
    proc = subprocess.Popen([binary, "-p", str(tmp_path), "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc, tmp_path)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        upstream.shutdown()
        upstream.server_close()


def wait_listening(port: int, proc, tmp_path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"nginx exited: {(tmp_path / 'error.log').read_text()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail("nginx did not listen")


def get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        return s.recv(4096)


def closed_within(s: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes `s` within `seconds`, while `trickle` goes out a byte every 0.2 s."""
    s.setblocking(False)
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline:
        try:
            s.recv(4096)
            return True  # an answer (408) or the end: nginx is done with it
        except BlockingIOError:
            pass
        except ConnectionResetError:
            return True
        if sent < len(trickle):
            try:
                s.send(trickle[sent:sent + 1])
            except OSError:
                return True
            sent += 1
        time.sleep(0.2)
    return False


def test_trickled_headers_and_a_stalled_body_are_closed_and_never_reach_daphne(nginx):
    assert get(nginx, "/").startswith(b"HTTP/1.1 200")
    headers = socket.create_connection(("127.0.0.1", nginx))
    headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    body = socket.create_connection(("127.0.0.1", nginx))
    body.sendall(b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
    try:
        assert closed_within(headers, TIMEOUT_S + 3, trickle=b"X-Trickle: " + b"a" * 100)
        assert closed_within(body, TIMEOUT_S + 3)
    finally:
        headers.close()
        body.close()
    assert Upstream.seen == ["/"]


def test_one_address_holds_at_most_limit_conn_requests(nginx):
    answers = []

    def slow():
        answers.append(get(nginx, "/slow").split(b"\r\n", 1)[0])

    threads = [threading.Thread(target=slow) for _ in range(PER_ADDRESS + 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert answers.count(b"HTTP/1.1 200 OK") == PER_ADDRESS, answers
    assert answers.count(b"HTTP/1.1 503 Service Temporarily Unavailable") == 3, answers
