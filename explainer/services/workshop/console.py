"""`make workshop`'s console: honcho's processes write to a log file, and the teacher's terminal shows only what
a teacher acts on: the banner, "Ready" once every worker has loaded the model, a worker's restart, the reason
the class stopped, and a quiet Ctrl-C."""
from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, TextIO

WORKER_UP = re.compile(r"Running worker for channels \['([\w.-]+)'\]")
DAPHNE_UP = "Listening on TCP address"
RESTARTING = "starting it again"  # docs/deploy/Procfile's worker loop, after a worker was killed


class Console:
    """Follows the processes' log; `ready` is printed once every worker and every Daphne is up."""

    def __init__(self, out: TextIO, workers: int, daphnes: int, ready: Callable[[], str]):
        self.out, self.workers, self.daphnes, self.ready = out, workers, daphnes, ready
        self.up: set[str] = set()
        self.listening = 0
        self.is_ready = False
        self.down: set[str] = set()

    def read(self, line: str) -> None:
        """One line of the log."""
        if DAPHNE_UP in line:
            self.listening += 1
        if RESTARTING in line:
            channel = line.split(" was killed", 1)[0].rsplit(" ", 1)[-1]
            self.down.add(channel)
            self.say(f"{channel} stopped unexpectedly; the workshop is starting it again (its visitors press Play again).")
        if found := WORKER_UP.search(line):
            channel = found.group(1)
            if channel in self.down:
                self.down.discard(channel)
                self.say(f"{channel} is back.")
            self.up.add(channel)
        if not self.is_ready and len(self.up) >= self.workers and self.listening >= self.daphnes:
            self.is_ready = True
            self.say(self.ready())

    def say(self, text: str) -> None:
        self.out.write(text.rstrip("\n") + "\n")
        self.out.flush()


def follow(command: list[str], env: dict, cwd: Path, log_path: Path, console: Console) -> int:
    """Run `command` with its output in `log_path`, feeding each line to `console`; the command's exit status,
    or 0 after Ctrl-C (honcho stops every process; nothing of it reaches the terminal)."""
    with open(log_path, "w") as log, open(log_path, errors="replace") as reader:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            pending = ""
            while True:
                pending += reader.read()
                *lines, pending = pending.split("\n")
                for line in lines:
                    console.read(line)
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
        except KeyboardInterrupt:
            return stop(proc, console)
        finally:
            if proc.poll() is None:
                proc.kill()
    if proc.returncode in (130, -signal.SIGINT):  # honcho stopped on a Ctrl-C that this process ignored
        console.say("Stopped: every process of the workshop has exited.")
        return 0
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    console.say(f"The workshop stopped (exit {proc.returncode}). The last lines of {log_path}:\n{tail}")
    return proc.returncode or 1


def stop(proc: subprocess.Popen, console: Console) -> int:
    """Ctrl-C: the terminal sent SIGINT to honcho too; send it only if it did not (a `kill -INT` of this
    process), then wait for honcho to stop the rest."""
    console.say("Stopping the workshop…")
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()
    console.say("Stopped: every process of the workshop has exited.")
    return 0
