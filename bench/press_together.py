"""A class pressing Enter together (bench/README.md): `make workshop` with WORKERS workers on loopback, then
STUDENTS sockets each send one `start` at the same moment and never press again. Past the free generation
slots the starts wait in the start line (explainer/services/admission/start_queue.py) and run in turn.

Prints: how many got a `done` with that one press, `busy` and errors (both should be 0), how many waited in line
and the furthest place, the wait from Enter to the run's `session` (p50/p95/max), the whole room's time, and
whether each student's reported place only ever moved up (first come first served).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from classroom import MAX_STUDENTS, Socket, Workshop, free_port, percentile


def queued(m: dict) -> bool:
    return m["type"] == "status" and m.get("state") == "queued"


async def press(student: Socket, tokens: int, n: int) -> dict:
    pressed = time.perf_counter()
    await student.send({"type": "start", "text": f"Once upon a time {n}", "params": {"max_new_tokens": tokens, "seed": n}})
    end = await student.until(lambda m: m["type"] in ("done", "error", "busy"), 600)
    session = next((t for t, m in student.seen if m["type"] == "session"), None)
    places = [m["position"] for _, m in student.seen if queued(m)]
    return {"end": end["type"], "end_message": end, "waited_s": None if session is None else session - pressed,
            "places": places, "moved_up_only": places == sorted(places, reverse=True)}


async def room(args) -> dict:
    url = f"ws://127.0.0.1:{args.port}/ws/session/"
    students = [await Socket(url).open() for _ in range(args.students)]
    for s in students:
        await s.until(lambda m: m.get("state") == "ready", 60)
    started = time.perf_counter()
    results = await asyncio.gather(*(press(s, args.tokens, n) for n, s in enumerate(students)))
    seconds = time.perf_counter() - started
    for s in students:
        await s.ws.close()
    waits = [r["waited_s"] for r in results if r["waited_s"] is not None]
    return {"students": args.students, "done_with_one_press": sum(r["end"] == "done" for r in results),
            "busy": sum(r["end"] == "busy" for r in results),
            "errors": [r["end_message"] for r in results if r["end"] == "error"],
            "waited_in_line": sum(bool(r["places"]) for r in results),
            "furthest_place": max((max(r["places"]) for r in results if r["places"]), default=0),
            "places_moved_up_only": all(r["moved_up_only"] for r in results),
            "wait_to_session_p50_s": percentile(waits, 50), "wait_to_session_p95_s": percentile(waits, 95),
            "wait_to_session_max_s": round(max(waits), 2) if waits else None, "room_s": round(seconds, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= MAX_STUDENTS:
        parser.error(f"1 to {MAX_STUDENTS} students")
    args.port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workshop(args.port, args.workers, Path(tmp))
        try:
            ws.wait_ready()
            report = asyncio.run(asyncio.wait_for(room(args), 900))
        finally:
            stopped = ws.stop()
            log_tail = ws.log()[-4000:]
    report.update(workers=args.workers, tokens=args.tokens, stopped_on_ctrl_c=stopped)
    report["errors"] = [f"{e.get('code')}: {e.get('message')}" for e in report["errors"]]
    print(json.dumps(report) if args.json else "\n".join(f"{k:28} {v}" for k, v in report.items()))
    ok = (report["done_with_one_press"] == args.students and not report["errors"] and report["places_moved_up_only"]
          and stopped)
    if not ok:
        print(log_tail, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
