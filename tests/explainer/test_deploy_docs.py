"""docs/deploy.md as written: its `make workshop` commands start a class, the host's link logs in, a visitor's
run lands on a worker, and Ctrl-C stops every process (Redis, workers, Daphne)."""
import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from http.cookiejar import CookieJar

import pytest
import websockets

from tests.explainer.live_server import ROOT, free_port
from tests.explainer.redis_server import redis_binary

DOC = ROOT / "docs" / "deploy.md"


def documented_commands() -> list[str]:
    """The sh block of the section "A workshop on one machine", without its comments."""
    section = DOC.read_text().split("## A workshop on one machine", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_every_documented_variable_reaches_the_processes():
    """Each line's PORT, WORKERS and BIND become the command's --port, --workers and Daphne's address."""
    commands = documented_commands()
    assert commands[0] == "make workshop"
    for line in commands:
        *assignments, make, target = shlex.split(line)
        assert (make, target) == ("make", "workshop"), line
        env = dict(a.split("=", 1) for a in assignments)
        dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "workshop"], cwd=ROOT, capture_output=True,
                             text=True, env={**os.environ, **env}, check=True).stdout
        assert f"--port {env.get('PORT', '8000')} --workers {env.get('WORKERS', '2')}" in dry, dry
    procfile = (ROOT / "docs" / "deploy" / "Procfile").read_text()
    assert "-b ${BIND:-127.0.0.1} -p $PORT" in procfile  # BIND from the environment, as the docs say


def group_alive(pgid: int) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pgid=,stat=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split()[0] == str(pgid) and not line.split()[1].startswith("Z")]


def test_make_workshop_as_documented_runs_a_class_and_ctrl_c_stops_it(tmp_path):
    redis_binary()
    port = free_port()
    env = {**os.environ, "PORT": str(port), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "EXPLAINER_WORKSHOP_LOG": str(tmp_path / "processes.log")}
    env.pop("REDIS_URL", None)
    log = open(tmp_path / "workshop.log", "w+")
    proc = subprocess.Popen(shlex.split(documented_commands()[0]), cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        banner = wait_for(lambda: re.search(r"\?link=(\S+)", (tmp_path / "workshop.log").read_text()), proc, tmp_path)
        # The console says when the class can start, and says it quietly: the processes' chatter is in the log file.
        wait_for(lambda: "Ready: 2 workers, model bundled" in (tmp_path / "workshop.log").read_text(), proc, tmp_path)
        console = (tmp_path / "workshop.log").read_text()
        assert f"log to {tmp_path / 'processes.log'}" in console and "Running worker for channels" not in console
        assert console.count("password: ") == 2, console  # the banner again once ready, in view
        assert (tmp_path / "processes.log").read_text().count("Running worker for channels") == 2
        wait_for(lambda: listening(port), proc, tmp_path)
        assert log_in_with_link(port, banner.group(1)) == 200
        assert log_in_with_link(port, banner.group(1)) == 403  # one time only
        done, status = asyncio.run(asyncio.wait_for(one_run(port), 120))
        assert done["type"] == "done" and status.get("worker") in ("inference-0", "inference-1"), (done, status)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole foreground group
        deadline = time.time() + 60
        while group_alive(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        left = group_alive(proc.pid)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"still running after Ctrl-C: {left}"
    assert not listening(port)
    console = (tmp_path / "workshop.log").read_text()
    own = [line for line in console.splitlines() if not line.startswith("make")]  # make[1]: Leaving directory…
    assert "Traceback" not in console and own[-1] == "Stopped: every process of the workshop has exited.", console[-2000:]


def wait_for(check, proc, tmp_path, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"make workshop: {(tmp_path / 'workshop.log').read_text()[-3000:]}")


def listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def log_in_with_link(port: int, token: str) -> int:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    try:
        with opener.open(f"http://127.0.0.1:{port}/host/?link={token}", timeout=30) as page:
            return page.status if b'id="stats"' in page.read() else -1
    except urllib.error.HTTPError as refused:
        return refused.code


async def one_run(port: int):
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws/session/", origin=websockets.Origin(f"http://127.0.0.1:{port}")) as ws:
        await ws.send(json.dumps({"type": "start", "text": "Once upon a time", "params": {"max_new_tokens": 4, "seed": 1}}))
        status = {}
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "status" and "worker" in message:
                status = message
            if message["type"] in ("done", "error"):
                return message, status


def test_an_impossible_device_is_one_line(tmp_path):
    """The Procfile's worker line with EXPLAINER_DEVICE=cuda:0 on a machine without CUDA (or past its GPUs)."""
    import torch

    device = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU; cuda:0 on a CPU machine
    env = {**os.environ, "EXPLAINER_DEVICE": device, "REDIS_URL": "redis://127.0.0.1:1/0", "OMP_NUM_THREADS": "1",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    result = subprocess.run([os.sys.executable, "manage.py", "runworker", "inference-0"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"EXPLAINER_DEVICE={device}: this machine has"), lines


def test_the_systemd_units_raise_the_descriptor_limit():
    """systemd's default of 1,024 descriptors is what slow clients filled (issue 22, N5; docs/deploy.md)."""
    for unit in ("hit-enter-daphne@.service", "hit-enter-worker@.service"):
        text = (ROOT / "docs" / "deploy" / unit).read_text()
        limit = re.search(r"^LimitNOFILE=(\d+)$", text.split("[Service]", 1)[1], re.M)
        assert limit and int(limit.group(1)) >= 65536, unit
