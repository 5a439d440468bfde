"""What the class benchmarks share (bench/workshop.py, bench/press_together.py): `make workshop` in its own
process group, and a student's socket that keeps every message with its arrival time."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import websockets

ROOT = Path(__file__).resolve().parents[1]
MAX_STUDENTS = 64
RUN_TYPES = ("session", "prefill", "step", "done", "check", "status", "error", "mask", "embedding_check")


def page_origin(ws_url: str) -> str:
    """The Origin a page served by that server sends: same host and port, http(s) for ws(s)."""
    scheme, rest = ws_url.split("://", 1)
    return ("https" if scheme == "wss" else "http") + "://" + rest.split("/", 1)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo), 2)


class Workshop:
    """`make workshop` in its own process group: its log, its one-time host link, its workers' pids."""

    def __init__(self, port: int, workers: int, tmp: Path):
        self.port, self.workers, self.log_path = port, workers, tmp / "workshop.log"
        env = {**os.environ, "PORT": str(port), "WORKERS": str(workers), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
               "EXPLAINER_MODEL": os.environ.get("EXPLAINER_MODEL", "bundled"),  # a class soak: the fast model
               "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}", "EXPLAINER_WORKER_TIMEOUT_S": "5",
               "EXPLAINER_WORKSHOP_LOG": str(tmp / "processes.log")}
        env.pop("REDIS_URL", None)
        self.proc = subprocess.Popen(["make", "workshop"], cwd=ROOT, env=env, stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        """The console, then the processes' own log (Redis, workers, Daphne: `make workshop` keeps it off the console)."""
        processes = self.log_path.with_name("processes.log")
        return self.log_path.read_text(errors="replace") + (processes.read_text(errors="replace") if processes.exists() else "")

    def wait_ready(self, timeout: float = 300) -> str:
        """The one-time host link's token, once every worker listens and Daphne accepts connections."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            log = self.log()
            link = re.search(r"\?link=(\S+)", log)
            if link and "Ready: " in log and self.listening():
                return link.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"make workshop did not come up:\n{self.log()[-3000:]}")

    def listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def worker_pid(self, name: str) -> int:
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        for line in out.splitlines():
            pid, args = line.strip().split(None, 1)
            if args.endswith(f"manage.py runworker {name}") and "python" in args.split()[0] and \
                    Path(f"/proc/{pid}/cwd").resolve() == ROOT:
                return int(pid)
        raise RuntimeError(f"no process runs {name}")

    def resident_bytes(self) -> int:
        """The resident memory of every process make workshop started (make, honcho, Redis, Daphne, the workers)."""
        try:
            group = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for process in group:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:  # a worker between its death and its restart
                pass
        return total

    def alive(self) -> bool:
        return self.proc.poll() is None and self.listening()

    def stop(self) -> bool:
        """Ctrl-C, as in a terminal; True when everything stopped within 60 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return False
        return not self.listening()


@dataclass
class Socket:
    """One page's socket: every message with its arrival time; acks every 8 like static/js/client.js."""
    url: str
    headers: dict = field(default_factory=dict)
    seen: list[tuple[float, dict]] = field(default_factory=list)
    got: asyncio.Event = field(default_factory=asyncio.Event)

    async def open(self) -> "Socket":
        self.ws = await websockets.connect(self.url, origin=websockets.Origin(page_origin(self.url)), max_size=2**24,
                                           additional_headers=self.headers)
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        try:
            async for text in self.ws:
                self.seen.append((time.perf_counter(), json.loads(text)))
                if len(self.seen) % 8 == 0:
                    await self.ws.send(json.dumps({"type": "ack", "received": len(self.seen)}))
                self.got.set()
        except websockets.ConnectionClosed:
            pass

    async def send(self, message: dict) -> None:
        await self.ws.send(json.dumps(message))

    async def until(self, predicate, timeout: float, start: int = 0) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for _, m in self.seen[start:]:
                if predicate(m):
                    return m
            self.got.clear()
            try:
                await asyncio.wait_for(self.got.wait(), max(0.05, deadline - time.time()))
            except asyncio.TimeoutError:
                break
        last = [(m.get("type"), m.get("state"), m.get("step")) for _, m in self.seen[-5:]]  # short: a caller shows a tail
        raise TimeoutError(f"{self.url}: nothing matched in {timeout} s; last (type, state, step): {last}")

    def run_frames(self, after: int = 0) -> list[tuple[float, dict]]:
        """The broadcast's frames: from its `session` through its `finished` status."""
        frames = [(t, m) for t, m in self.seen[after:] if m["type"] in RUN_TYPES]
        start = next((i for i, (_, m) in enumerate(frames) if m["type"] == "session"), len(frames))
        end = next((i for i, (_, m) in enumerate(frames) if i > start and m["type"] == "status"
                    and m["state"] == "finished"), len(frames) - 1)
        return frames[start:end + 1]
