"""Fairness benchmark (issue 22, N2 and N2b): one visitor's reply, alone and then beside 4 attacking addresses.

Each attacking address (127.0.0.2 … 127.0.0.5 on loopback) runs both attacks at once, as the issue found them:
- N2: one socket holding a long prompt sends `fork step=1` as soon as each fork returns (a re-prefill each);
- N2b: one socket restarts the same long prompt every 0.5 s (a prefill and a causal-mask check each).
The victim (127.0.0.1) runs a short greedy reply; its inter-token latency (ITL) p95 and its reply's time are
measured alone and under the attack, in the same invocation. Nothing is asserted: figures and the targets.

    .venv/bin/python bench/fairness.py                      # SmolLM2, the issue's model
    .venv/bin/python bench/fairness.py --model bundled --tokens 32
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import percentile  # noqa: E402
from load_server import start_server, stop_server  # noqa: E402

ATTACKERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank while children play. "
LONG = SENTENCE * 19  # about 355 SmolLM2 tokens with the chat template, as in the issue (the cap is 384)
VICTIM = "Why is the sky blue?"
TARGETS = {"itl_p95_ratio": 3.0, "reply_time_ratio": 2.0}


class Socket:
    """A visitor's socket that acks what it reads, as the page does (a run whose reader never acks is held)."""

    def __init__(self, ws):
        self.ws, self.received = ws, 0

    async def send(self, message: dict) -> None:
        await self.ws.send(json.dumps(message))

    async def recv(self) -> dict:
        message = json.loads(await self.ws.recv())
        self.received += 1
        if self.received % 8 == 0:
            await self.send({"type": "ack", "received": self.received})
        return message

    async def close(self) -> None:
        await self.ws.close()


async def connect(url: str, address: str) -> Socket:
    ws = await websockets.connect(url.replace("http", "ws") + "/ws/session/", origin=url, max_size=2**24,
                                  local_addr=(address, 0), proxy=None)
    socket = Socket(ws)
    await socket.recv()  # ready
    return socket


async def until(ws: Socket, kinds: set[str]) -> dict:
    while (message := await ws.recv())["type"] not in kinds:
        pass
    return message


async def victim_reply(url: str, tokens: int) -> dict:
    """The victim's greedy reply: gaps between its steps and the reply's time from `start` to `done`."""
    ws = await connect(url, "127.0.0.1")
    try:
        await ws.send({"type": "start", "messages": [{"role": "user", "content": VICTIM}],
                       "params": {"temperature": 0, "max_new_tokens": tokens, "min_new_tokens": tokens}})
        sent, arrivals = time.perf_counter(), []
        while (kind := (message := await ws.recv())["type"]) != "done":
            if kind == "step":
                arrivals.append(time.perf_counter())
            elif kind in ("error", "busy"):
                raise SystemExit(f"the victim was refused: {message}")
        gaps = [(b - a) * 1e3 for a, b in zip(arrivals, arrivals[1:])]
        return {"itl_p50_ms": percentile(gaps, 50), "itl_p95_ms": percentile(gaps, 95), "itl_max_ms": max(gaps),
                "reply_s": time.perf_counter() - sent, "ttft_ms": (arrivals[0] - sent) * 1e3, "steps": len(arrivals)}
    finally:
        await ws.close()


async def forker(url: str, address: str, stop: asyncio.Event, counts: dict) -> None:
    """N2: fork step 1 as soon as each fork returns."""
    ws = await connect(url, address)
    await ws.send({"type": "start", "messages": [{"role": "user", "content": LONG}], "paused": True,
                   "params": {"max_new_tokens": 8}})
    if (reply := await until(ws, {"check", "error", "busy"}))["type"] != "check":  # the prefill and check are out
        raise SystemExit(f"the attack's prompt was refused: {reply}")
    await ws.send({"type": "step"})
    step = await until(ws, {"step"})
    while not stop.is_set():
        await ws.send({"type": "fork", "step": 1, "token_id": step["token"]["id"]})
        reply = await until(ws, {"step", "error", "busy"})
        counts["forks" if reply["type"] == "step" else "refused"] += 1
    await ws.close()


async def restarter(url: str, address: str, stop: asyncio.Event, counts: dict) -> None:
    """N2b: restart the long prompt every 0.5 s."""
    ws = await connect(url, address)
    reader = asyncio.create_task(read_forever(ws))
    while not stop.is_set():
        await ws.send({"type": "start", "messages": [{"role": "user", "content": LONG}], "params": {"max_new_tokens": 8}})
        counts["restarts"] += 1
        await asyncio.sleep(0.5)
    reader.cancel()
    await ws.close()


async def read_forever(ws: Socket) -> None:
    while True:
        await ws.recv()


async def drain(ws_tasks: list[asyncio.Task]) -> None:
    for task in ws_tasks:
        task.cancel()
    await asyncio.gather(*ws_tasks, return_exceptions=True)


async def under_attack(url: str, tokens: int, warm_s: float) -> tuple[dict, dict]:
    stop, counts = asyncio.Event(), {"forks": 0, "restarts": 0, "refused": 0}
    tasks = [asyncio.create_task(f(url, a, stop, counts)) for a in ATTACKERS for f in (forker, restarter)]
    await asyncio.sleep(warm_s)  # the attack under way before the victim comes
    try:
        return await victim_reply(url, tokens), counts
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=60)
        await drain(tasks)


async def main(args) -> dict:
    global LONG
    LONG = SENTENCE * args.sentences
    with tempfile.TemporaryDirectory() as workdir:
        # The prefix cache off: the long prompt, sent again each round, is prefilled in full every time
        proc, url = start_server(args, 16, Path(workdir), {"EXPLAINER_PREFIX_CACHE_BYTES": "0"})
        try:
            await victim_reply(url, 4)  # warm-up: the first request pays for lazy loading
            alone = await victim_reply(url, args.tokens)
            attacked, counts = await under_attack(url, args.tokens, args.warm_s)
        finally:
            stop_server(proc)
    ratios = {"itl_p95_ratio": attacked["itl_p95_ms"] / alone["itl_p95_ms"],
              "reply_time_ratio": attacked["reply_s"] / alone["reply_s"]}
    return {"model": args.model, "tokens": args.tokens, "alone": alone, "attacked": attacked, "attack": counts,
            "ratios": ratios, "targets": TARGETS,
            "met": {k: ratios[k] <= TARGETS[k] for k in TARGETS}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--tokens", type=int, default=48, help="the victim's reply length (greedy, never shorter)")
    p.add_argument("--warm-s", type=float, default=3.0, help="seconds of attack before the victim starts")
    p.add_argument("--sentences", type=int, default=19, help="the attack's prompt: this many sentences (19: about 355 "
                   "SmolLM2 tokens; 15 for bundled's tokenizer)")
    p.add_argument("--server-timeout", type=float, default=240)
    return p


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parser().parse_args())), indent=2))
