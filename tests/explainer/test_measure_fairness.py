"""`measure` cannot starve visitors (issue 14, item 3): background priority, one at a time, per-address rate, cache."""
import asyncio
import threading
import time

import pytest

from explainer.services.device import measurements
from explainer.services.device.executors import BACKGROUND, CHECK, STEP, DeviceExecutor
from tests.support import connect, until

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


def test_a_waiting_visitor_step_runs_before_a_waiting_measurement():
    device = DeviceExecutor("model-test")
    gate, order = threading.Event(), []
    busy = device.submit_at(STEP, lambda: gate.wait(30))  # the thread is busy with a step
    while not busy.running():
        time.sleep(0.001)
    background = device.submit_at(BACKGROUND, lambda: order.append("measure"))
    steps = [device.submit_at(STEP, lambda n=n: order.append(f"step {n}")) for n in range(3)]
    assert device.waiting() == 4 and device.waiting(BACKGROUND) == 1
    gate.set()
    for future in [busy, background, *steps]:
        future.result(timeout=10)
    assert order == ["step 0", "step 1", "step 2", "measure"]


def test_a_runs_check_goes_between_a_measurements_slices_after_the_waiting_steps():
    """A run's check (CHECK) does not wait for a whole measurement: it runs at the measurement's next slice, after
    the visitors' calls waiting then (the visitor's `done` waits for its check)."""
    device = DeviceExecutor("model-test")
    queued, order = threading.Event(), []

    def measurement():  # two forward passes; the calls below are queued while the first one runs
        queued.wait(30)
        order.append("pass 1")
        device.run_waiting_steps()  # what slices() runs before each forward pass
        order.append("pass 2")
    background = device.submit_at(BACKGROUND, measurement)
    while not background.running():
        time.sleep(0.001)
    check = device.submit_at(CHECK, lambda: order.append("check"), "10.0.0.7")
    step = device.submit_at(STEP, lambda: order.append("step"), "10.0.0.8")
    queued.set()
    for future in (background, check, step):
        future.result(timeout=10)
    assert order == ["pass 1", "step", "check", "pass 2"]


def test_an_exception_reaches_the_caller_and_the_thread_goes_on():
    device = DeviceExecutor("model-test")
    with pytest.raises(ZeroDivisionError):
        device.submit(lambda: 1 / 0).result(timeout=10)
    assert device.submit(lambda x: x + 1, 1).result(timeout=10) == 2


async def test_a_measurement_is_cached_per_server_and_model_with_its_date():
    comm = await connect("198.51.100.20")
    await comm.send_json_to({"type": "measure", "what": "prefill_decode"})
    first = (await until(comm, lambda m: m["type"] == "serving"))[-1]
    assert first["cached"] is False and first["measured_at"].endswith("+00:00")
    other = await connect("198.51.100.21")  # another visitor, at once: the cached result, same date
    await other.send_json_to({"type": "measure", "what": "prefill_decode"})
    again = (await until(other, lambda m: m["type"] == "serving"))[-1]
    assert again["cached"] is True and (again["measured_at"], again["data"]) == (first["measured_at"], first["data"])
    for c in (comm, other):
        await c.disconnect()


async def test_fresh_measurements_per_address_are_rate_limited(settings, monkeypatch):
    settings.EXPLAINER_MEASURE_INTERVAL_S = 60
    comm = await connect("198.51.100.22")
    monkeypatch.setattr(measurements, "EXPERIMENTS", 2)  # each fresh one holds the model for seconds: keep it short
    await comm.send_json_to({"type": "measure", "what": "prefill_decode"})  # a visitor measures each section once
    assert (await until(comm, lambda m: m["type"] == "serving"))[-1]["cached"] is False
    await comm.send_json_to({"type": "measure", "what": "speculative", "draft": "ngram"})
    assert (await until(comm, lambda m: m["type"] == "serving"))[-1]["cached"] is False
    await comm.send_json_to({"type": "measure", "what": "quantize"})  # past the burst: refused before it runs
    busy = await comm.receive_json_from(timeout=10)
    assert busy["type"] == "busy" and "per address" in busy["reason"] and 0 < busy["retry_after_s"] <= 60
    await comm.send_json_to({"type": "measure", "what": "kv"})  # arithmetic: never limited
    assert (await comm.receive_json_from(timeout=10))["type"] == "serving"
    other = await connect("198.51.100.23")
    await other.send_json_to({"type": "measure", "what": "speculative", "draft": "ngram"})
    assert (await until(other, lambda m: m["type"] == "serving"))[-1]["what"] == "speculative"
    for c in (comm, other):
        await c.disconnect()


async def test_one_measurement_at_a_time(monkeypatch):
    gate, real = threading.Event(), measurements.measure
    monkeypatch.setattr(measurements, "measure", lambda *a: (gate.wait(30), real(*a))[1])
    first, second = await connect("198.51.100.24"), await connect("198.51.100.25")
    await first.send_json_to({"type": "measure", "what": "prefill_decode"})
    for _ in range(200):
        if measurements._running:
            break
        await asyncio.sleep(0.02)
    await second.send_json_to({"type": "measure", "what": "speculative", "draft": "ngram"})
    busy = await second.receive_json_from(timeout=10)
    assert busy["type"] == "busy" and "another measurement (prefill_decode)" in busy["reason"]
    gate.set()
    assert (await until(first, lambda m: m["type"] == "serving"))[-1]["what"] == "prefill_decode"
    await second.send_json_to({"type": "measure", "what": "speculative", "draft": "ngram"})
    assert (await until(second, lambda m: m["type"] == "serving"))[-1]["cached"] is False
    for c in (first, second):
        await c.disconnect()
