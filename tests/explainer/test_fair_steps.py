"""No starvation (issue 14, item 3): a decoding visitor's steps keep coming while others flood the device
with long prefills and a measurement. Asserted on what ran on the device thread, in what order and how
much, never on times."""
import asyncio
import threading
from pathlib import Path

import pytest
import torch

from explainer.services.device.executors import BACKGROUND, CHECK, CHECK_SHARE, FIRST_TOKEN, STEP, TICK, DeviceExecutor
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.scheduler import StepScheduler, forward_ahead
from tests.support import stories_spec

STEPS = 24  # the decoding visitor's tokens
CHUNK = 8  # prefill chunk of the joiners
JOINERS = 3
LONG_PROMPT = [1] + list(range(300, 359))  # 60 tokens: 7 chunks and a last one of 4
MEASURE_CAP = 2000  # the measurement's forward passes at most (it stops early once the visitor is done)


@pytest.fixture(scope="module")
def loaded():
    return load_model(stories_spec(), device="cpu")


def new_session(loaded, ids, steps, chunk=None):
    return GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=ids),
                             SamplingParams(max_new_tokens=steps, temperature=0.0), prefill_chunk=chunk)


class DeviceLog:
    """What the device thread ran, in order: ("tick", visitor in it), ("prefill", tokens fed), ("measure", 1)."""

    def __init__(self, executor: DeviceExecutor):
        self.executor, self.entries = executor, []

    def submit(self, kind: str, fn, owner=None):
        """Run fn() on the device thread; it returns (what to log, what to hand back). `owner`: as the server's
        scheduler owns its calls (TICK for ticks and the forwards run ahead of them, executors.scheduler_for)."""
        def logged():
            noted, result = fn()
            self.entries.append((kind, noted))
            return result
        return asyncio.wrap_future(self.executor.submit_at(STEP, logged, owner))


async def test_a_decoding_visitor_is_not_starved_by_long_prefills_or_a_measurement(loaded):
    executor = DeviceExecutor("model-fairness-test")
    log = DeviceLog(executor)
    visitor = new_session(loaded, [1, 403, 407], STEPS)

    def kind(fn) -> str:  # a tick, or the forward its continuing sessions get ahead of their next tick
        return "ahead" if getattr(fn, "func", None) is forward_ahead else "tick"
    scheduler = StepScheduler(lambda fn: log.submit(kind(fn), lambda: (any(s is visitor for s in fn.args[0]), fn()), TICK),
                              max_batch=8, max_wait_s=0)  # each tick logged with whether the visitor is in it
    await asyncio.wrap_future(executor.submit_at(STEP, visitor.prefill))
    visitor_done, measured, started = threading.Event(), [], threading.Event()

    @torch.inference_mode()  # as the experiments run (batching, quantize): visitors' calls must not inherit it
    def measurement():
        ids = torch.tensor([LONG_PROMPT])
        with executor.slices(loaded.model):
            started.set()
            while not visitor_done.is_set() and len(measured) < MEASURE_CAP:
                loaded.model(input_ids=ids)
                if not executor._slicing:
                    measured.append(executor.between_slices)
        return len(measured)

    measuring = asyncio.wrap_future(executor.submit_at(BACKGROUND, measurement))
    while not started.is_set():  # the measurement holds the device thread from here on
        await asyncio.sleep(0.005)

    async def decode():
        payloads = [await scheduler.step(visitor) for _ in range(STEPS)]
        visitor_done.set()
        return payloads

    async def join():
        joiner = new_session(loaded, LONG_PROMPT, 4, chunk=CHUNK)

        def part():  # logs the prompt tokens this call fed
            before = joiner.fed
            more = joiner.prefill_part()
            return joiner.fed - before, more
        while await log.submit("prefill", part):
            pass
        await log.submit("prefill", lambda: (len(LONG_PROMPT) - joiner.fed, joiner.prefill()))
        return [await scheduler.step(joiner) for _ in range(4)]

    payloads, *joined = await asyncio.gather(decode(), *(join() for _ in range(JOINERS)))
    assert await measuring < MEASURE_CAP  # the visitor finished while the measurement was still running

    assert [p["step"] for p in payloads] == list(range(1, STEPS + 1))
    assert all(len(j) == 4 for j in joined)
    visitor_ticks = [i for i, (kind, mine) in enumerate(log.entries) if kind == "tick" and mine]
    assert len(visitor_ticks) == STEPS
    for a, b in zip(visitor_ticks, visitor_ticks[1:]):  # between two of the visitor's ticks: at most a chunk per joiner
        fed = sum(n for kind, n in log.entries[a + 1:b] if kind == "prefill")
        assert fed <= 2 * JOINERS * CHUNK, (a, b, log.entries[a:b + 1])
    assert sum(n for kind, n in log.entries if kind == "prefill") == JOINERS * len(LONG_PROMPT)
    assert executor.between_slices >= STEPS  # every visitor tick ran between the measurement's forward passes
    assert measured and measured[-1] >= STEPS - 1  # ...and the measurement went on between them


async def test_runs_finishing_together_share_one_weights_checksum_taken_in_slices(loaded, monkeypatch):
    from explainer.services.run import after_run_checks
    from inference import article_checks
    expected, calls, real = article_checks.weights_checksum(loaded.model), [], article_checks.parameter_sums
    monkeypatch.setattr(article_checks, "parameter_sums", lambda group: (calls.append(len(group)), real(group))[1])
    monkeypatch.setattr(after_run_checks, "SLICE_ELEMENTS", 20_000)  # the 260K-parameter model in several slices
    crowd = await asyncio.gather(*(after_run_checks.weights_after_run("cpu", loaded.model) for _ in range(5)))
    assert all(c == expected for c in crowd)  # the same bits as one pass
    slices = len(article_checks.parameter_slices(loaded.model, 20_000))
    assert slices > 1 and len(calls) == slices and sum(calls) == len(list(loaded.model.parameters()))
    later = await after_run_checks.weights_after_run("cpu", loaded.model)  # after that one began: a fresh one
    assert later == crowd[0] and len(calls) == 2 * slices


async def test_a_starts_call_before_its_first_token_does_not_wait_behind_others_checks():
    """While ticks are due and the other calls have had their share, an address's calls (checks, chunks) wait for
    the ticks; a start's own call between its prefill and its first token (FIRST_TOKEN: copying its prompt's
    embedding rows) runs right after the tick in flight, before them. Behind a class's checks it waited ~11 s."""
    executor = DeviceExecutor("model-first-token-test")
    due, ran, gate = threading.Event(), [], threading.Event()
    executor.tick_due = lambda within=None: due.is_set()
    due.set()
    executor.pace.add(TICK, 1.0)
    executor.pace.add("other", 1.0)  # the others have had more than OTHER_SHARE of the ticks' time: they wait
    blocked = asyncio.wrap_future(executor.submit_at(STEP, gate.wait, TICK))  # the device busy while all is queued

    def call(name, owner):
        return asyncio.wrap_future(executor.submit_at(STEP, lambda: ran.append(name), owner))
    checks = [call(f"check {n}", "10.0.0.7") for n in range(4)]
    first, tick = call("first token", FIRST_TOKEN), call("tick", TICK)
    gate.set()
    await asyncio.gather(blocked, tick, first)
    assert ran == ["tick", "first token"]  # the address's checks still wait: ticks are due and they had their share
    due.clear()  # no tick due: the checks go
    await asyncio.gather(*checks)
    assert ran == ["tick", "first token", "check 0", "check 1", "check 2", "check 3"]


async def test_a_runs_checks_go_after_visitors_calls_and_take_a_small_share_while_ticks_are_due():
    """CHECK calls (the causal-mask check, the weights checksum) run after every waiting visitor call; while ticks
    are due, once they have had CHECK_SHARE of the ticks' time they wait, though an address's other calls still go."""
    executor = DeviceExecutor("model-check-share-test")
    due, ran = threading.Event(), []
    executor.tick_due = lambda within=None: due.is_set()

    def call(name, priority, owner):
        return asyncio.wrap_future(executor.submit_at(priority, lambda: ran.append(name), owner))

    def busy():  # the device busy while the queue fills
        gate = threading.Event()
        return gate, asyncio.wrap_future(executor.submit_at(STEP, gate.wait, TICK))
    gate, blocked = busy()
    first = [call("check 0", CHECK, "10.0.0.7"), call("chunk 0", STEP, "10.0.0.8")]
    gate.set()
    await asyncio.gather(blocked, *first)
    assert ran == ["chunk 0", "check 0"]  # no tick due: the visitor's call first, then the check

    due.set()
    executor.pace.add(TICK, 1.0)
    executor.pace.add("check", 2 * CHECK_SHARE)  # the checks have had twice their share
    gate, blocked = busy()
    checks, chunk = [call(f"check {n}", CHECK, "10.0.0.7") for n in (1, 2)], call("chunk 1", STEP, "10.0.0.8")
    gate.set()
    await asyncio.gather(blocked, chunk)
    assert ran[2:] == ["chunk 1"] and executor.waiting(CHECK) == 2  # the other call had no use of its share: it went
    await call("tick", STEP, TICK)
    assert ran[3:] == ["tick"] and executor.waiting(CHECK) == 2  # the checks still wait, ticks go
    due.clear()  # no tick due: the checks go
    await asyncio.gather(*checks)
    assert ran[4:] == ["check 1", "check 2"]



async def test_a_class_s_checks_take_one_decoding_visitors_part_of_the_check_share():
    """The checks' share is CHECK_SHARE of one decoding visitor's part of the ticks: time that a lone visitor's
    check may still take holds a class's checks back while its ticks come (at 32 visitors, 0.15 of the device
    cost the class 14% of its tokens per second; its checks go once its runs end)."""
    executor = DeviceExecutor("model-check-rows-test")
    due, ran = threading.Event(), []
    executor.tick_due = lambda within=None: due.is_set()
    due.set()
    executor.pace.add(TICK, 1.0)
    executor.pace.add("check", CHECK_SHARE / 4)  # a quarter of the share: a lone visitor's check may go on
    executor.tick_rows = lambda: 8  # a class of 8 decodes: their checks' share is CHECK_SHARE / 8, used up
    gate = threading.Event()
    blocked = asyncio.wrap_future(executor.submit_at(STEP, gate.wait, TICK))
    check = asyncio.wrap_future(executor.submit_at(CHECK, lambda: ran.append("check"), "10.0.0.7"))
    assert executor._ticks_first(CHECK)  # the check waits for the class's ticks...
    tick = asyncio.wrap_future(executor.submit_at(STEP, lambda: ran.append("tick"), TICK))
    gate.set()
    await asyncio.gather(blocked, tick)
    assert ran == ["tick"] and executor.waiting(CHECK) == 1
    executor.tick_rows = lambda: 1  # ...until one visitor decodes: its check has had a quarter of its share
    assert not executor._ticks_first(CHECK)
    await check
    assert ran == ["tick", "check"]
    executor.shutdown()


def test_the_servers_event_loop_thread_runs_torch_on_one_thread_and_its_devices_on_theirs():
    """The ASGI application, once imported, leaves its thread (Daphne's event loop) on one torch thread: an operation
    run there in parallel would give it a helper team beside the device's. The devices keep the count the process
    had (two here, set as on a 2-core machine: the test suite itself runs on one)."""
    import os
    import subprocess
    import sys
    code = ("import torch; import explainer.asgi; from explainer.services.device import executors; "
            "print(torch.get_num_threads(), executors.DEVICE_THREADS)")
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["1", "2"]


def test_the_server_sets_its_openmp_waiting_before_anything_loads_torch():
    """libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when torch loads it: Daphne's entry point must have
    them set by then (explainer/settings.py), or the model thread's helpers sleep at every operation."""
    import os
    import subprocess
    import sys
    code = ("import builtins, os, sys\n"
            "seen, real = [], builtins.__import__\n"
            "def watch(name, *args, **kwargs):\n"
            "    if name.split('.')[0] == 'torch' and 'torch' not in sys.modules and not seen:\n"
            "        seen.append((os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT')))\n"
            "    return real(name, *args, **kwargs)\n"
            "builtins.__import__ = watch\n"
            "import explainer.asgi\n"
            "print(seen)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[('PASSIVE', '10000')]", out.stdout[-500:]


async def test_a_device_thread_runs_torch_on_the_devices_threads_and_the_loader_on_one(monkeypatch):
    """One team of torch helper threads per device thread: the loader's thread runs on one thread (an idle team
    beside the device's made every operation of its forward wait for a sleeping helper), whatever count the last
    thread to set one left for new threads."""
    from explainer.services.device import executors
    monkeypatch.setattr(executors, "DEVICE_THREADS", 2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # what a new thread would take
        device = DeviceExecutor("model-threads-test", executors.DEVICE_THREADS)
        loader = DeviceExecutor("model-loader-test", 1)
        assert await asyncio.wrap_future(device.submit(torch.get_num_threads)) == 2
        assert await asyncio.wrap_future(loader.submit(torch.get_num_threads)) == 1
        device.shutdown(), loader.shutdown()
    finally:
        torch.set_num_threads(before)
    assert executors.executor_for("loader").threads == 1


async def test_a_device_thread_runs_each_call_on_the_threads_its_fit_leaves():
    """While other processes keep a core busy the model thread gives it up, and takes it back when they stop
    (inference/cores.py): each call runs on the count the fit gave just before it."""
    counts = iter([2, 1, 1, 2])

    class Fit:
        def threads_now(self):
            return next(counts)

    before = torch.get_num_threads()
    try:
        device = DeviceExecutor("model-fit-test", 2, Fit())
        seen = [await asyncio.wrap_future(device.submit(torch.get_num_threads)) for _ in range(4)]
        device.shutdown()
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 1, 1, 2]
    from explainer.services.device import executors
    assert executors.executor_for("cpu").fit is not None and executors.executor_for("loader").fit is None
