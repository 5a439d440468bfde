"""The class-sized soak (bench/workshop.py) in CI: `make workshop` with 2 workers idle for a minute, then
30 students (20 follow a host broadcast that the host pauses for 150 s and resumes, 10 run their own prompts),
one worker SIGKILLed mid-run and started again, one Chromium follower; no hung socket, and the memory back
within 10% of the start once everyone has left. Bounded and loopback only; timings are printed, not asserted.

An endurance test (marked slow): that full class under CI=true (full_range()); otherwise 35 idle seconds (past
the 30 s Redis socket timeout and the 3 x 10 s worker timeout, where an idle class used to break) and 15
students (10 followers, 5 own runs, a 10 s pause), with the same checks."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import full_range
from tests.explainer.live_server import ROOT
from tests.explainer.redis_server import redis_binary


@pytest.mark.slow
def test_a_class_survives_an_idle_minute_a_killed_worker_and_30_students():
    redis_binary()  # a failure in CI, a skip on a laptop without Redis
    idle, pause, followers, own = (60, 150, 20, 10) if full_range() else (35, 10, 10, 5)
    command = [sys.executable, "bench/workshop.py", "--json", "--browser", "--idle", str(idle), "--pause", str(pause),
               "--followers", str(followers), "--own", str(own)]
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                            timeout=1800)
    assert result.stdout.strip(), result.stderr[-4000:]
    report = json.loads(result.stdout)
    print(json.dumps(report, indent=1))
    assert report["up_after_idle"] and report["stopped_on_ctrl_c"], result.stderr[-4000:]
    assert report["errors"] == [], report["errors"]  # worker_lost of the killed worker's visitors is counted apart
    assert report["followers_matching_host"] == report["followers"] == followers, report["follower_frames"]
    assert report["busy"] == 0, report  # a full house waits in the start line, it is not turned away
    assert report["host_steps"] > 2 and report["own_done"] == own  # every own run ended, some after a restart
    assert report["worker_lost"] <= own and report["restarted"], (report, result.stderr[-4000:])
    assert report["hung_sockets"] == 0, report  # every student got their run's end
    assert report["memory_end_over_start"] <= 1.10, report  # after everyone left, the class's memory is back
    assert report["browser"]["page_errors"] == [] and not report["browser"]["error_on_screen"], report["browser"]
    assert result.returncode == 0, result.stderr[-4000:]
