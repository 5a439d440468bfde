"""Batched decoding across sessions (issue 14): each session's row of one forward pass equals its lone run."""
import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import numpy as np
import torch

from inference.engine import GenerationSession
from inference.wire.packing import unpack
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.scheduler import Arrivals, StepScheduler, batched_decode, can_batch, step_all

DEVICE = ThreadPoolExecutor(1, thread_name_prefix="device")  # one thread, as a device's executor: calls in turn
DEVICE_THREAD = DEVICE.submit(lambda: threading.current_thread().name).result()
PROMPTS = [[1, 403], [1, 403, 407, 260, 300, 301, 302], [1, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321]]
STEPS = 8


def session(loaded, ids, **params):
    return GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=ids),
                             SamplingParams(max_new_tokens=STEPS, **params))


def lone_run(loaded, ids, **params):
    s = session(loaded, ids, **params)
    s.prefill()
    steps = []
    while not s.finished:
        steps.append(s.step())
    return steps


def batched_run(loaded, prompts, params):
    sessions = [session(loaded, ids, **p) for ids, p in zip(prompts, params)]
    for s in sessions:
        s.prefill()
    payloads = [[] for _ in sessions]
    for _ in range(STEPS):
        live = [i for i, s in enumerate(sessions) if not s.finished]
        for i, payload in zip(live, step_all([sessions[i] for i in live])):
            assert not isinstance(payload, Exception), payload
            payloads[i].append(payload)
    return payloads


def close(a, b, path):
    """Equal payloads up to float tolerance (packed float16 arrays compared as numbers); timings differ."""
    if isinstance(a, dict) and "b64" in a:
        assert a["shape"] == b["shape"], path
        np.testing.assert_allclose(unpack(a), unpack(b), rtol=1e-2, atol=1e-3, err_msg=path)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            if k not in ("timing", "batch_size"):
                close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        # Payload floats are rounded to 4 decimals: two runs a hair apart can round one unit apart (0.0533 and
        # 0.0532 from 0.05325 +- 1e-7), and 0.0533 - 0.0532 is a little over 1e-4 in binary floating point.
        assert a == pytest.approx(b, rel=1e-3, abs=1.5e-4), path
    else:
        assert a == b, path


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_sessions_of_different_prompt_lengths_in_one_batch_match_their_lone_runs(model, request):
    loaded = request.getfixturevalue(model)
    params = [{"temperature": 0.0}, {"temperature": 0.0}, {"temperature": 0.9, "seed": 7}]
    batched = batched_run(loaded, PROMPTS, params)
    assert max(s["batch_size"] for rows in batched for s in rows) == 3
    for ids, p, rows in zip(PROMPTS, params, batched):
        lone = lone_run(loaded, ids, **p)
        assert [s["token"]["id"] for s in rows] == [s["token"]["id"] for s in lone]  # greedy and seeded alike
        live = [sum(len(r) > j for r in batched) for j in range(len(rows))]  # sessions still running at each tick
        assert [s["batch_size"] for s in rows] == [1] + [n if n > 1 else 1 for n in live[1:]]  # step 1: its prefill
        for mine, alone in zip(rows, lone):
            close(mine, alone, f"step {alone['step']}")


def test_a_row_is_the_sessions_own_attention_over_its_own_cache(stories):
    sessions = stepped_once(stories)
    assert all(can_batch(s) for s in sessions)
    lengths = [s.cache.get_seq_length() for s in sessions]
    forwards = batched_decode(sessions)
    for s, f, length in zip(sessions, forwards, lengths):
        assert f.last_attn.shape[-1] == length + 1  # its own keys, no padding
        assert torch.allclose(f.last_attn.sum(-1), torch.ones(()), atol=1e-5)  # each head's row sums to 1
        assert s.cache.get_seq_length() == length + 1 and f.batch_size == 3


def stepped_once(stories) -> list:
    """One greedy session per prompt, each prefilled and one step in: ready to decode together."""
    sessions = [session(stories, ids, temperature=0.0) for ids in PROMPTS]
    for s in sessions:
        s.prefill()
        s.step()
    return sessions


async def test_the_scheduler_batches_sessions_that_ask_together(stories):
    sessions = stepped_once(stories)
    loop = asyncio.get_running_loop()
    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=2, max_wait_s=0.001)
    payloads = await asyncio.gather(*(scheduler.step(s) for s in sessions))
    assert sorted(p["batch_size"] for p in payloads) == [1, 2, 2]  # max_batch 2: the third in the next tick
    assert (scheduler.ticks, scheduler.stepped) == (2, 3)


async def test_a_ticks_steps_are_encoded_on_the_devices_thread_before_they_are_handed_out(stories):
    """`encode` (the web side's frame text) runs on the device's thread, between its forward passes, for every step
    of a tick; the event loop gets the encoded payloads, and a session's failure stays its own exception."""
    sessions = stepped_once(stories)
    sessions[2].stop()  # its step raises: handed to its future as it is, never encoded
    loop, seen = asyncio.get_running_loop(), []

    def encode(payload):
        seen.append((payload["step"], threading.current_thread().name))
        return {**payload, "encoded": True}

    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=0.001, encode=encode)
    results = await asyncio.gather(*(scheduler.step(s) for s in sessions), return_exceptions=True)
    assert [r["encoded"] for r in results[:2]] == [True, True] and isinstance(results[2], Exception)
    assert sorted(seen) == [(2, DEVICE_THREAD), (2, DEVICE_THREAD)]


LONG = [1] + list(range(300, 337))  # 38 tokens: chunks of 8 are 4 parts and a last chunk of 6


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_a_prompt_prefilled_in_chunks_gives_the_same_prefill_and_steps_as_one_pass(model, request):
    loaded = request.getfixturevalue(model)
    whole = session(loaded, LONG, temperature=0.0)
    chunked = GenerationSession(loaded, whole.prompt, whole.params, prefill_chunk=8)
    parts = 0
    while chunked.prefill_part():
        parts += 1
        assert chunked.cache.get_seq_length() == 8 * parts and chunked.pending is None
    assert parts == 4 and chunked.fed == 32  # a 5th call feeds nothing (6 are left): prefill() runs the last
    mine, alone = chunked.prefill(), whole.prefill()
    assert mine["attention"]["mode"] == alone["attention"]["mode"]
    close(mine, alone, "prefill")
    full, full_alone = chunked.kept.get(0, "attn"), whole.kept.get(0, "attn")  # (layers, heads, P, P): every matrix
    assert full.shape[-2:] == (len(LONG),) * 2 and chunked.cache.get_seq_length() == len(LONG)
    torch.testing.assert_close(full.float(), full_alone.float(), rtol=1e-2, atol=1e-3)
    while not whole.finished:
        close(chunked.step(), whole.step(), f"step {whole.step_index}")
    assert chunked.finished == whole.finished and chunked.generated == whole.generated


def test_prefill_alone_runs_every_chunk_and_a_short_prompt_is_one_pass(stories):
    chunked = session(stories, LONG, temperature=0.0)
    chunked.prefill_chunk = 8
    payload = chunked.prefill()  # the CLI and the tests call prefill() only: it feeds the chunks itself
    assert payload["mask"]["size"] == len(LONG) and chunked.fed == len(LONG) and not chunked.parts
    short = session(stories, PROMPTS[0], temperature=0.0)
    short.prefill_chunk = 8
    assert short.prefill_part() is False and short.cache is None  # nothing to split: prefill() does it in one pass


async def test_a_tick_waits_for_the_sessions_of_the_last_tick_and_a_lone_session_never_waits(stories):
    sessions = stepped_once(stories)
    loop = asyncio.get_running_loop()
    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=3600)

    async def late(s, n):  # asks again after n other turns of the event loop: its last step still going out
        for _ in range(n):
            await asyncio.sleep(0)
        return await scheduler.step(s)
    first = await asyncio.gather(*(scheduler.step(s) for s in sessions))
    again = await asyncio.gather(*(late(s, 50 * n) for n, s in enumerate(sessions)))
    assert [p["batch_size"] for p in first + again] == [3] * 6 and scheduler.ticks == 2
    alone = StepScheduler(scheduler.run, max_batch=8, max_wait_s=3600)
    lone = session(stories, PROMPTS[0], temperature=0.0)
    await loop.run_in_executor(DEVICE, lone.prefill)  # on the device's thread: the last tick's forward_ahead may run
    for _ in range(3):  # the last tick's only session has asked: nothing to wait for (an hour, else)
        assert (await alone.step(lone))["batch_size"] == 1


async def test_sessions_just_prefilled_sample_their_first_token_before_the_next_prefill_pass(stories):
    """A class arriving over two prefill passes: the first pass's sessions get step 1 (sampled from their prefill)
    in a tick before the latecomers' pass runs, not after it."""
    loop, log, late = asyncio.get_running_loop(), [], []

    def made(ids):
        return GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=ids),
                                 SamplingParams(max_new_tokens=2, temperature=0.0))
    early, latecomer = [made(ids) for ids in PROMPTS[:2]], made(PROMPTS[2])
    names = {id(s): n for n, s in enumerate(early + [latecomer])}

    async def run(fn):
        inner = getattr(fn, "func", fn)
        kind = getattr(inner, "func", inner).__name__  # prefill_all, encoded_tick (a tick), forward_ahead or _nothing
        if kind == "_nothing":  # the scheduler only waits for the device's turn
            return fn()
        if kind == "prefill_all" and not late:  # the latecomer asks while the first pass runs
            late.append(asyncio.create_task(visit(latecomer)))
            await asyncio.sleep(0)
        result = await loop.run_in_executor(DEVICE, fn)
        log.append((kind, sorted(names[id(s)] for s in fn.args[0])))
        return result
    scheduler = StepScheduler(run, max_batch=8, max_wait_s=3600)  # waits on who will ask, never on the clock

    async def visit(s):
        await scheduler.prefill(s)
        return [await scheduler.step(s) for _ in range(2)]
    steps = await asyncio.wait_for(asyncio.gather(*(visit(s) for s in early)), 120)
    steps.append(await asyncio.wait_for(late[0], 120))
    assert [[p["step"] for p in mine] for mine in steps] == [[1, 2]] * 3
    # forward_ahead: the next step's forward, run while a tick's steps go out (not while a prefill waits: it goes first)
    assert log == [("prefill_all", [0, 1]), ("encoded_tick", [0, 1]), ("prefill_all", [2]), ("encoded_tick", [0, 1, 2]),
                   ("forward_ahead", [2]), ("encoded_tick", [2])]


async def test_a_session_that_leaves_is_not_waited_for_and_the_next_prefill_goes_at_once(stories, monkeypatch):
    """A run paused on its prefill (or closed) asks for no step 1: once it leaves, the ticker stops waiting for it and
    a newcomer's prefill runs. Without leave() the ticker would wait FIRST_STEP_WAIT_S (an hour here)."""
    monkeypatch.setattr("inference.scheduler.FIRST_STEP_WAIT_S", 3600)
    loop = asyncio.get_running_loop()
    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=3600)
    paused, newcomer = session(stories, PROMPTS[0], temperature=0.0), session(stories, PROMPTS[1], temperature=0.0)
    await scheduler.prefill(paused)  # ... and never asks for step 1
    assert scheduler.tick_due()
    arriving = asyncio.create_task(scheduler.prefill(newcomer))
    done, _ = await asyncio.wait([arriving], timeout=0.5)
    assert not done  # the ticker waits for the paused run's step 1
    scheduler.leave(paused)
    assert (await asyncio.wait_for(arriving, 60))["type"] == "prefill"
    scheduler.leave(newcomer)  # the newcomer closes: nothing is due
    assert not scheduler.tick_due()


async def test_a_prefill_pass_waits_for_starts_on_their_way_and_a_lone_start_waits_for_nobody(stories, monkeypatch):
    """Starts being read (Arrivals) join the pass that begins meanwhile, so a class pressing Enter together shares one
    pass; a start that gives up (refused, in line) stops the wait; with nobody on the way a prefill goes at once.
    JOIN_WAIT_S is an hour here: every wait ends on an arrival, never on the clock."""
    monkeypatch.setattr("inference.scheduler.JOIN_WAIT_S", 3600)
    loop, passes = asyncio.get_running_loop(), []

    async def run(fn):
        inner = getattr(fn, "func", fn)
        if getattr(inner, "func", inner).__name__ == "prefill_all":
            passes.append(sorted(PROMPTS.index(s.prompt.ids) for s in fn.args[0]))
        return await loop.run_in_executor(DEVICE, fn)
    scheduler = StepScheduler(run, max_batch=8, max_wait_s=3600, arrivals=Arrivals())
    first, second, refused = (scheduler.arrivals.coming() for _ in range(3))
    made = [session(stories, ids, temperature=0.0) for ids in PROMPTS]

    async def arrive(arrival, s):
        arrival.here()
        return await scheduler.prefill(s)
    opening = asyncio.create_task(arrive(first, made[0]))
    done, _ = await asyncio.wait([opening], timeout=0.2)
    assert not done and passes == []  # two starts are still on their way
    refused.here()  # this one was refused: nobody waits for it
    both = await asyncio.wait_for(asyncio.gather(opening, arrive(second, made[1])), 60)
    assert [p["type"] for p in both] == ["prefill", "prefill"] and passes == [[0, 1]]
    for s in made[:2]:
        scheduler.leave(s)  # they ask for no step 1 here
    lone = await asyncio.wait_for(arrive(scheduler.arrivals.coming(), made[2]), 60)  # nobody else on the way
    assert lone["type"] == "prefill" and passes == [[0, 1], [2]] and scheduler.arrivals.count == 0


async def test_the_next_forward_runs_ahead_while_steps_go_out_and_every_step_is_the_lone_runs(stories):
    """After a tick, the sessions that will step again get their next forward at once (forward_ahead), before they ask:
    the next tick only samples. Every payload still equals the session's lone run."""
    loop, log = asyncio.get_running_loop(), []

    async def run(fn):
        inner = getattr(fn, "func", fn)
        log.append(getattr(inner, "func", inner).__name__)
        return await loop.run_in_executor(DEVICE, fn)
    scheduler = StepScheduler(run, max_batch=8, max_wait_s=3600)
    sessions = [session(stories, ids, temperature=0.0) for ids in PROMPTS]
    for s in sessions:
        await loop.run_in_executor(DEVICE, s.prefill)
    steps = [[] for _ in sessions]
    for n in range(STEPS):
        live = [i for i, s in enumerate(sessions) if not s.finished]
        for i, payload in zip(live, await asyncio.gather(*(scheduler.step(sessions[i]) for i in live))):
            steps[i].append(payload)
        if n and any(not s.finished for s in sessions):
            await asyncio.wait([scheduler.ahead])
            assert all(s.ahead is not None for s in sessions if not s.finished)  # before they ask again
    assert log.count("forward_ahead") >= STEPS - 1 and all(s.ahead is None for s in sessions if s.finished)
    for ids, mine in zip(PROMPTS, steps):
        close(lone_run(stories, ids, temperature=0.0), mine, "steps")


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_a_fork_or_a_stop_after_a_forward_ahead_drops_it(model, request):
    """A forward run ahead adds the last token's keys to the cache; a fork (rewind) or a stop (truncate) that comes
    before the next step drops it, and the run goes on exactly as without it."""
    loaded = request.getfixturevalue(model)

    def stepped(ahead: bool):
        s = session(loaded, PROMPTS[1], temperature=0.0, min_new_tokens=STEPS)  # no end of sequence in the way
        s.prefill()
        for _ in range(3):
            s.step()
        if ahead:
            s.forward_ahead()
            assert s.ahead is not None and s.cache.get_seq_length() == len(s.ids)
        return s
    for ahead in (True, False):
        forked = stepped(ahead)
        forked.fork(2, 300)
        assert forked.ahead is None and forked.cache.get_seq_length() == len(forked.ids) - 1
    a, b = stepped(True), stepped(False)
    close([a.fork(2, 300), a.step(), a.step()], [b.fork(2, 300), b.step(), b.step()], "fork")
    a, b = stepped(True), stepped(False)
    a.truncate(2)
    b.truncate(2)
    assert a.ahead is None and a.kv() == b.kv() and a.ids == b.ids


def test_a_capture_records_only_its_own_threads_forward_passes(stories):
    """The residual-stream hooks sit on the shared model: a pass another thread runs while a capture is open (a pass run
    ahead on the device thread while a test runs its own) is not recorded in it, and the capture's own pass still is."""
    from inference.capture import residual_stream
    other = torch.tensor([[1, 403, 407, 260, 300, 301, 302, 303]])  # 8 positions: another visitor's pass
    with torch.no_grad(), residual_stream(stories.model, stories.adapter) as residuals:
        DEVICE.submit(stories.model, input_ids=other).result(timeout=60)
        assert residuals == []  # nothing of the other thread's pass
        stories.model(input_ids=torch.tensor([[1, 403]]))
    assert len(residuals) == stories.description.layers + 1 and {tuple(r.shape[:2]) for r in residuals} == {(1, 2)}
