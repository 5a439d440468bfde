"""`make workshop`'s console reads the processes' log: "Ready" once, after every worker and Daphne are up, and a
worker's restart in words a teacher acts on (explainer/services/workshop/console.py)."""
import io

from explainer.services.workshop.console import Console

LOG = ["12:00:01 system  | redis.1 started (pid=10)",
       "12:00:02 redis.1 | * Ready to accept connections tcp",
       "12:00:05 worker.1 | Running worker for channels ['inference-0']",
       "12:00:05 web.1 | INFO Listening on TCP address 127.0.0.1:8000"]


def console(workers=2) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(out, workers=workers, daphnes=1, ready=lambda: "Ready: banner"), out


def test_ready_only_once_every_worker_and_daphne_listen():
    shown, out = console()
    for line in LOG:
        shown.read(line)
    assert out.getvalue() == ""  # one of two workers: not ready, and none of the chatter is shown
    shown.read("12:00:09 worker.2 | Running worker for channels ['inference-1']")
    shown.read("12:00:10 worker.2 | Running worker for channels ['inference-1']")
    assert out.getvalue() == "Ready: banner\n"


def test_a_killed_worker_is_reported_and_its_return_too():
    shown, out = console(workers=1)
    for line in LOG:
        shown.read(line)
    shown.read("12:01:00 worker.1 | inference-0 was killed (exit 137): starting it again")
    shown.read("12:01:09 worker.1 | Running worker for channels ['inference-0']")
    assert out.getvalue().splitlines() == [
        "Ready: banner",
        "inference-0 stopped unexpectedly; the workshop is starting it again (its visitors press Play again).",
        "inference-0 is back."]
