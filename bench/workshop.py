"""Class-sized workshop soak on loopback (bench/README.md): `make workshop` with WORKERS inference workers,
idle first, then a room of WebSocket students: most follow a host broadcast, the rest run their own
prompts. Mid-run one worker (not the broadcast's) is SIGKILLed; its Procfile line starts it again.
Optionally one Chromium page follows too and is checked for an error on screen.

With --pause S the host starts the broadcast paused, steps it to step 2 and holds it there for S seconds (a
teacher explaining), then resumes.

Prints: errors (other than the killed worker's `worker_lost`), the worker_lost count, each follower's
frames against the host's, and how long after the host's page each follower saw each step (p50/p95);
hung sockets (a student who never got their run's end), and the class's memory (the resident sets of
make workshop's processes: Redis, Daphne, the workers) after the idle start and after every student left.
Bounded: at most 64 students, one broadcast, one own run each (plus one restart after worker_lost).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import json
import signal
import sys
import tempfile
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

from classroom import MAX_STUDENTS, Socket, Workshop, free_port, percentile

MAX_RESTARTS = 30  # one student's starts: busy answers (retry after 5 s) and worker_lost
PROMPT = [{"role": "user", "content": "Explain what a token is, in one sentence."}]


def finished(m: dict) -> bool:
    return m["type"] == "status" and m["state"] == "finished"


def host_session(port: int, token: str) -> str:
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"http://127.0.0.1:{port}/host/?link={token}", timeout=30):
        pass
    return next(c.value for c in jar if c.name == "sessionid")


async def own_run(student: Socket, tokens: int, report: dict) -> None:
    """One own prompt to its end; after `worker_lost` it starts again (on a live worker), after `busy` it
    waits the hinted seconds and starts again, as a student pressing Play again would (bounded)."""
    for attempt in range(MAX_RESTARTS):
        mark = len(student.seen)
        await student.send({"type": "start", "text": f"Once upon a time {attempt}",
                            "params": {"max_new_tokens": tokens, "seed": 1}})
        end = await student.until(lambda m: m["type"] in ("done", "error", "busy"), 300, mark)
        if end["type"] == "done":
            report["own_done"] += 1
            return
        if end["type"] == "busy":
            report["busy"] += 1
            await asyncio.sleep(end.get("retry_after_s", 1))
        elif end["code"] == "worker_lost":
            report["worker_lost"] += 1
        else:
            report["errors"].append(end)
            return
    report["errors"].append({"code": "gave_up", "message": f"no run finished in {MAX_RESTARTS} starts"})


async def chromium_follower(url: str, ready: asyncio.Event, done: asyncio.Event, report: dict) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
        page = await browser.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(url + "/")
        await page.locator("#workshop-banner button", has_text="Follow the host").click()
        await page.locator("#workshop-banner", has_text="Following the host").wait_for()
        ready.set()
        await done.wait()
        await page.wait_for_timeout(1500)
        status = await page.locator("#status-banner").inner_text()
        banner = await page.locator("#workshop-banner").inner_text()
        report["browser"] = {"status": status, "page_errors": errors,
                             "error_on_screen": "error" in (status + banner).lower()}
        await browser.close()


async def room(args, ws: Workshop, token: str) -> dict:
    report = {"errors": [], "worker_lost": 0, "busy": 0, "own_done": 0}
    url = f"ws://127.0.0.1:{args.port}/ws/session/"
    host = await Socket(f"ws://127.0.0.1:{args.port}/ws/host/", {"Cookie": f"sessionid={host_session(args.port, token)}"}).open()
    students = [await Socket(url).open() for _ in range(args.followers + args.own)]
    followers, loners = students[:args.followers], students[args.followers:]
    for s in students:
        await s.until(lambda m: m.get("state") == "ready", 60)
    for s in followers:
        await s.send({"type": "follow", "on": True})
        await s.until(lambda m: m["type"] == "workshop" and m["following"], 60)
    browser_ready, browser_done = asyncio.Event(), asyncio.Event()
    browser = asyncio.create_task(chromium_follower(f"http://127.0.0.1:{args.port}", browser_ready, browser_done, report)) \
        if args.browser else None
    if browser:
        await asyncio.wait_for(browser_ready.wait(), 120)

    # With a pause, the broadcast starts paused and the host steps it to step 2: a pause sent while it ran could
    # come after its last step on a loaded machine (the bundled model writes 24 tokens in under a second).
    await host.send({"type": "broadcast", "messages": PROMPT, "params": {"max_new_tokens": args.tokens, "seed": 3,
                                                                           "temperature": 0.8}, "paused": bool(args.pause)})
    status = await host.until(lambda m: m["type"] == "status" and "worker" in m, 120)
    own = [asyncio.create_task(own_run(s, args.tokens, report)) for s in loners]
    for step in (1, 2) if args.pause else ():
        await host.send({"type": "step"})
        await host.until(lambda m, n=step: m["type"] == "step" and m["step"] >= n, 120)
    await host.until(lambda m: m["type"] == "step" and m["step"] >= 2, 120)
    victim = next(w for w in (f"inference-{i}" for i in range(args.workers)) if w != status["worker"])
    os.kill(ws.worker_pid(victim), signal.SIGKILL)
    killed_at = time.time()
    if args.pause:  # the teacher explains step 2 for a while: the broadcast must outlast any idle timeout
        await asyncio.sleep(args.pause)
        await host.send({"type": "resume"})
    await host.until(finished, 300)
    await asyncio.gather(*own)
    for s in followers:
        await s.until(finished, 120)
    browser_done.set()
    if browser:
        await browser
    report["restarted"] = await restarted(ws, victim, killed_at)

    host_frames = host.run_frames()
    host_steps = {m["step"]: t for t, m in host_frames if m["type"] == "step"}
    latencies, matches = [], 0
    for s in followers:
        frames = s.run_frames()
        matches += [m for _, m in frames] == [m for _, m in host_frames]
        latencies += [(t - host_steps[m["step"]]) * 1e3 for t, m in frames if m["type"] == "step" and m["step"] in host_steps]
        report["errors"] += [m for _, m in s.seen if m["type"] == "error"]
    report["errors"] += [m for _, m in host.seen if m["type"] == "error"]
    hung = sum(not any(finished(m) for _, m in s.seen) for s in followers)
    hung += len(loners) - report["own_done"]
    for s in students + [host]:
        await s.ws.close()
    return {**report, "hung_sockets": hung, "killed_worker": victim, "broadcast_worker": status["worker"], "host_frames": len(host_frames),
            "host_steps": len(host_steps), "followers": len(followers), "followers_matching_host": matches,
            "follower_frames": sorted({len(s.run_frames()) for s in followers}),
            "follower_step_latency_p50_ms": percentile(latencies, 50),
            "follower_step_latency_p95_ms": percentile(latencies, 95)}


async def restarted(ws: Workshop, victim: str, since: float, timeout: float = 180) -> bool:
    """The Procfile's worker line starts the killed worker again; true once it answers again."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ws.log().count(f"Running worker for channels ['{victim}']") >= 2:
            return True
        await asyncio.sleep(0.5)
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--idle", type=float, default=60, help="seconds the class sits idle before anyone comes")
    parser.add_argument("--followers", type=int, default=20)
    parser.add_argument("--own", type=int, default=10, help="students running their own prompts")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--pause", type=float, default=0, help="seconds the host pauses the broadcast at step 2")
    parser.add_argument("--browser", action="store_true", help="one Chromium page follows too")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.followers + args.own <= MAX_STUDENTS or args.workers < 2:
        parser.error(f"1 to {MAX_STUDENTS} students and at least 2 workers (one is killed)")
    args.port = free_port()
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workshop(args.port, args.workers, Path(tmp))
        try:
            token = ws.wait_ready()
            time.sleep(args.idle)
            up_after_idle = ws.alive() and "Traceback" not in ws.log()
            memory_start = ws.resident_bytes()
            report = asyncio.run(asyncio.wait_for(room(args, ws, token), 900 + args.pause))
            time.sleep(10)  # every socket closed: the sessions' caches go (the workers reap what is left)
            memory_end = ws.resident_bytes()
            report.update(up_after_idle=up_after_idle, memory_start_mb=round(memory_start / 2**20, 1),
                          memory_end_mb=round(memory_end / 2**20, 1),
                          memory_end_over_start=round(memory_end / memory_start, 3) if memory_start else None)
        finally:
            report_stop = ws.stop()
            log_tail = ws.log()[-4000:]
    report.update(stopped_on_ctrl_c=report_stop, seconds=round(time.time() - started, 1), idle_s=args.idle, pause_s=args.pause,
                  students=args.followers + args.own, workers=args.workers)
    report["errors"] = [f"{e.get('code')}: {e.get('message')}" for e in report["errors"]]
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:32} {value}")
    ok = (not report["errors"] and report["followers_matching_host"] == report["followers"] and report["restarted"]
          and report["hung_sockets"] == 0
          and report["up_after_idle"] and report_stop and not report.get("browser", {}).get("error_on_screen"))
    if not ok:
        print(log_tail, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
