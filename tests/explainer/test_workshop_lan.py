"""A LAN class from one command (issue 25 point 2): `BIND=0.0.0.0 make workshop` allows this machine's LAN
addresses as hosts for that run only, and prints (and the host page shows) the URL students type, its short form
and a QR code. The "LAN" address in the end-to-end test is a second loopback address, 127.0.0.2 (Linux routes
all of 127/8 to lo), given as EXPLAINER_LAN_ADDRESSES, the setting for a machine behind NAT or in a container."""
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import namedtuple
from http.cookiejar import CookieJar

import pytest
import segno
import websockets

from explainer import lan
from explainer.management.commands.workshop import workshop_env
from tests.explainer.test_deploy_docs import documented_commands, group_alive, wait_for
from tests.explainer.live_server import ROOT, free_port
from tests.explainer.redis_server import redis_binary
from tests.conftest import require

Addr = namedtuple("Addr", "family address")
LAN = "127.0.0.2"


def test_lan_addresses_are_the_machines_ipv4_addresses_but_loopback_and_link_local(monkeypatch):
    interfaces = {"lo": [Addr(socket.AF_INET, "127.0.0.1"), Addr(socket.AF_INET6, "::1")],
                  "eth0": [Addr(socket.AF_INET, "192.168.1.20"), Addr(socket.AF_INET6, "fe80::1")],
                  "wlan0": [Addr(socket.AF_INET, "169.254.3.4"), Addr(socket.AF_INET, "10.0.0.7")]}
    monkeypatch.setattr(lan.psutil, "net_if_addrs", lambda: interfaces)
    assert lan.lan_addresses({}) == ["192.168.1.20", "10.0.0.7"]
    assert lan.class_urls("0.0.0.0", 8000, {}) == ["http://192.168.1.20:8000/", "http://10.0.0.7:8000/"]
    assert lan.class_urls("127.0.0.1", 8000, {}) == ["http://127.0.0.1:8000/"]  # this machine only
    assert lan.lan_addresses({"EXPLAINER_LAN_ADDRESSES": "203.0.113.5, 10.1.2.3"}) == ["203.0.113.5", "10.1.2.3"]
    with pytest.raises(ValueError):
        lan.lan_addresses({"EXPLAINER_LAN_ADDRESSES": "10.1.2"})  # a typo is named, not a dead URL


def test_the_qr_code_decodes_to_the_url():
    """segno draws it; its own matrix, read back module by module, is the terminal's drawing."""
    url = "http://192.168.1.20:8000/"
    drawing = lan.qr_terminal(url)
    size = len(segno.make(url, error="m").matrix) + 8  # a 4-module quiet zone each side
    assert len(drawing.splitlines()) == (size + 1) // 2 and set(drawing) <= set("█▀▄ \n")
    svg = lan.qr_svg(url)
    assert svg.startswith("<svg") and f"<title>QR code of {url}</title>" in svg and "<script" not in svg
    assert lan.short_form(url) == "192.168.1.20:8000"


def test_the_consoles_qr_code_reads_back_as_the_url():
    """What a phone camera does: the block drawing (a drawn block is a light module, as on a dark terminal) read by
    a QR decoder (zxing-cpp) is the students' URL."""
    import numpy as np
    try:
        import zxingcpp
    except ImportError:
        zxingcpp = None
    require(zxingcpp is not None, "zxing-cpp, a QR decoder (requirements-dev.txt)", "make venv")
    url = "http://192.168.1.20:8000/"
    halves = {"\u2588": (1, 1), "\u2580": (1, 0), "\u2584": (0, 1), " ": (0, 0)}  # █ ▀ ▄ and a space: top, bottom
    rows = []
    for line in lan.qr_terminal(url).splitlines():
        pairs = [halves[c] for c in line]
        rows += [[top for top, _ in pairs], [bottom for _, bottom in pairs]]
    light = np.array(rows, dtype=np.uint8) * 255
    pixels = np.kron(light, np.ones((6, 6), dtype=np.uint8))  # 6 pixels a module, as a camera would see it
    assert [found.text for found in zxingcpp.read_barcodes(pixels)] == [url]


def test_the_lan_addresses_are_allowed_hosts_only_when_serving_the_lan():
    lan_env, _ = workshop_env(8000, 1, 1, {"BIND": "0.0.0.0", "EXPLAINER_LAN_ADDRESSES": "10.0.0.7",
                                           "DJANGO_ALLOWED_HOSTS": "class.example.org", "REDIS_URL": "redis://x"})
    assert lan_env["DJANGO_ALLOWED_HOSTS"].split(",") == ["class.example.org", "10.0.0.7"]
    assert lan_env["EXPLAINER_CLASS_URLS"] == "http://10.0.0.7:8000/"
    local_env, _ = workshop_env(8000, 1, 1, {"BIND": "127.0.0.1", "EXPLAINER_LAN_ADDRESSES": "10.0.0.7",
                                             "REDIS_URL": "redis://x"})
    assert "10.0.0.7" not in local_env["DJANGO_ALLOWED_HOSTS"]
    assert local_env["EXPLAINER_CLASS_URLS"] == "http://127.0.0.1:8000/"


def get(url: str, host: str | None = None, opener=None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=30) as page:
            return page.status, page.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, ""


async def run_from(base: str) -> dict:
    """A student's run on the LAN address: the socket's Origin is that address (Channels checks it)."""
    async with websockets.connect(base.replace("http", "ws") + "ws/session/", origin=websockets.Origin(base.rstrip("/"))) as ws:
        await ws.send(json.dumps({"type": "start", "text": "Once upon a time", "params": {"max_new_tokens": 3, "seed": 1}}))
        while (message := json.loads(await ws.recv()))["type"] not in ("done", "error"):
            pass
        return message


def test_bind_0000_make_workshop_serves_the_lan_address_and_shows_it(tmp_path):
    redis_binary()
    port = free_port()
    lan_line = next(line for line in documented_commands() if "BIND=" in line)
    assert lan_line == "BIND=0.0.0.0 make workshop"  # docs/deploy.md's line, run below as written (in a shell)
    env = {**os.environ, "PORT": str(port), "WORKERS": "1", "EXPLAINER_LAN_ADDRESSES": LAN,
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "EXPLAINER_WORKSHOP_LOG": str(tmp_path / "processes.log")}
    env.pop("REDIS_URL", None)
    env.pop("DJANGO_ALLOWED_HOSTS", None)
    log_path = tmp_path / "workshop.log"
    env.pop("BIND", None)
    proc = subprocess.Popen(["sh", "-c", lan_line], cwd=ROOT, env=env, stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://{LAN}:{port}/"
    try:
        link = wait_for(lambda: re.search(r"\?link=(\S+)", log_path.read_text()), proc, tmp_path).group(1)
        banner = log_path.read_text()
        assert f"Students open: {base}   (short: {LAN}:{port})" in banner, banner
        assert "▀" in banner and f"Host page: {base}host/" in banner, banner
        wait_for(lambda: "Ready: 1 worker, model bundled" in log_path.read_text(), proc, tmp_path)
        wait_for(lambda: get(base)[0] == 200, proc, tmp_path)  # the LAN address is an allowed host
        assert get(base, host="elsewhere.example")[0] == 400  # and only it: not every name
        assert asyncio.run(asyncio.wait_for(run_from(base), 120))["type"] == "done"
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        status, page = get(f"{base}host/?link={link}", opener=opener)
        assert status == 200 and f'data-class-url>{base}</a>' in page and f"<strong data-class-short>{LAN}:{port}</strong>" in page
        assert f"<title>QR code of {base}</title>" in page
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.time() + 60
        while group_alive(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
