"""The class quiz under a room's load (issue 26; bench/README.md): `make workshop` with 2 workers on bundled, a host
and N followers (30 by default) on loopback. The host broadcasts a paused run and asks; every follower answers at
once (within one burst); the host reveals.

Prints: the question's arrival at the followers after Ask (p50/p95 ms); the baseline: one follower's answer round
trip alone, measured first in the same run; the room's answer round trips when all answer together (p50/p95 and
p95 over the baseline); how many answers counted (the host's count and the reveal's); the reveal's arrival and
the held step's arrival at the followers after Reveal (p50/p95); the frames of the asked step that reached a
follower before the reveal (must be 0); refusals. Nothing is asserted about time.
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
from workshop import PROMPT, host_session


def quiz_of(m: dict) -> dict:
    if m["type"] != "workshop":
        return {}
    return (m.get("broadcast") or {}).get("quiz") or {}


async def answer(s: Socket, question: str, choice: int) -> float:
    """One answer's round trip (ms), from the send to its `answered` (or refusal)."""
    mark, sent = len(s.seen), time.perf_counter()
    await s.send({"type": "answer", "question": question, "choice": choice})
    await s.until(lambda m: m["type"] in ("answered", "error"), 60, mark)
    return (time.perf_counter() - sent) * 1e3


def arrivals(sockets: list[Socket], since: float, predicate) -> list[float]:
    return [(next(t for t, m in s.seen if t >= since and predicate(m)) - since) * 1e3 for s in sockets]


async def room(args, token: str) -> dict:
    url = f"ws://127.0.0.1:{args.port}/ws/session/"
    host = await Socket(f"ws://127.0.0.1:{args.port}/ws/host/", {"Cookie": f"sessionid={host_session(args.port, token)}"}).open()
    followers = [await Socket(url).open() for _ in range(args.followers)]
    for s in followers:
        await s.until(lambda m: m.get("state") == "ready", 60)
        await s.send({"type": "follow", "on": True})
        await s.until(lambda m: m["type"] == "workshop" and m["following"], 60)
    await host.send({"type": "broadcast", "messages": PROMPT, "paused": True,
                     "params": {"max_new_tokens": 8, "seed": 3, "temperature": 0.8}})
    await host.until(lambda m: m["type"] == "status" and m.get("run_state") == "paused", 300)
    for s in followers:
        await s.until(lambda m: m["type"] == "status" and m.get("run_state") == "paused", 120)

    asked = time.perf_counter()
    await host.send({"type": "ask"})
    for s in followers:
        await s.until(lambda m: quiz_of(m).get("state") == "open", 120)
    question = quiz_of(next(m for _, m in reversed(followers[0].seen) if quiz_of(m)))
    question_ms = arrivals(followers, asked, lambda m: quiz_of(m).get("state") == "open")
    alone = [await answer(followers[0], question["id"], 0) for _ in range(5)]  # the baseline: one answer at a time
    together = await asyncio.gather(*(answer(s, question["id"], i % 10) for i, s in enumerate(followers)))
    refused = [m for s in followers for _, m in s.seen if m["type"] == "error"]
    stats = await host.until(lambda m: m["type"] == "host_stats" and (m.get("quiz") or {}).get("answered") == args.followers, 30)
    early = sum(1 for s in followers for t, m in s.seen if t >= asked and m["type"] in ("step", "part", "done"))

    revealed_at = time.perf_counter()
    await host.send({"type": "reveal"})
    for s in followers:
        await s.until(lambda m: m["type"] == "step", 120, 0)
        await s.until(lambda m: quiz_of(m).get("state") == "revealed", 120, 0)
    reveal_ms = arrivals(followers, revealed_at, lambda m: quiz_of(m).get("state") == "revealed")
    step_ms = arrivals(followers, revealed_at, lambda m: m["type"] == "step")
    outcome = quiz_of(next(m for _, m in reversed(followers[0].seen) if quiz_of(m).get("state") == "revealed"))["outcome"]
    for s in followers + [host]:
        await s.ws.close()
    base = percentile(alone, 50)
    return {"followers": args.followers, "question_arrival_p50_ms": percentile(question_ms, 50),
            "question_arrival_p95_ms": percentile(question_ms, 95), "answer_alone_p50_ms (baseline)": base,
            "answer_together_p50_ms": percentile(list(together), 50), "answer_together_p95_ms": percentile(list(together), 95),
            "answer_together_p95_over_baseline": round(percentile(list(together), 95) / base, 2) if base else None,
            "answers_counted_by_host": stats["quiz"]["answered"], "answers_counted_at_reveal": outcome["answered"],
            "reveal_arrival_p50_ms": percentile(reveal_ms, 50), "reveal_arrival_p95_ms": percentile(reveal_ms, 95),
            "held_step_arrival_p95_ms": percentile(step_ms, 95), "asked_step_frames_before_reveal": early,
            "refusals": [f"{m.get('code')}: {m.get('message')}" for m in refused]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.followers <= MAX_STUDENTS:
        parser.error(f"1 to {MAX_STUDENTS} followers")
    args.port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workshop(args.port, 2, Path(tmp))
        try:
            report = asyncio.run(asyncio.wait_for(room(args, ws.wait_ready()), 600))
        finally:
            ws.stop()
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:40} {value}")
    ok = (report["answers_counted_at_reveal"] == args.followers and not report["refusals"]
          and report["asked_step_frames_before_reveal"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
