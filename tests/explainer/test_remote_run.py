"""The REDIS_URL code path in one process: sockets' runs go through RemoteRun to an inference worker
(channels' Worker on the in-memory layer), exactly as they do across processes with Redis."""
import asyncio

import pytest
from channels.layers import get_channel_layer
from channels.worker import Worker

from explainer.asgi import application
from explainer.services.workshop import room_stats
from explainer.services.device import model_registry
from explainer.services.admission.capacity import generating
from explainer.services.run.remote import NO_WORKER, RESTARTING, STARTING, WORKER_LOST, RemoteRun, WorkersSeen
from tests.support import connect, stories_spec, until

START = {"type": "start", "text": "Once upon a time", "params": {"temperature": 0.8, "seed": 1, "max_new_tokens": 5}}


@pytest.fixture(autouse=True)
def remote_mode(settings):
    settings.EXPLAINER_MODEL = stories_spec()
    settings.EXPLAINER_DEVICE = "cpu"  # the worker's stats below name the CPU, also on a machine with CUDA
    settings.EXPLAINER_WORKERS = True
    settings.EXPLAINER_WORKER_CHANNELS = ["inference-test"]
    settings.EXPLAINER_WORKER_PICK_S = 0.5
    settings.EXPLAINER_WORKER_TIMEOUT_S = 5.0
    settings.EXPLAINER_WORKER_START_WAIT_S = 2.0
    WorkersSeen.answered = False  # a fresh Daphne: no worker has answered it yet
    model_registry.reset()
    yield
    model_registry.reset()
    # The in-process worker stands for another process: killed, its generation slots die with it (a real
    # worker's count goes with its process), instead of staying taken for the next test in this one.
    with generating._lock:
        generating.active = 0
        generating.by_address.clear()


class InProcessWorker(Worker):
    """channels' Worker, started as a task and killable the way a dead process is: nothing answers."""

    async def handle(self):
        self.listeners = [asyncio.ensure_future(self.listener(channel)) for channel in self.channels]
        await asyncio.wait(self.listeners)

    def cancel(self):
        for task in self.listeners + [d["future"] for d in self.application_instances.values()]:
            task.cancel()
        self.task.cancel()


def start_worker() -> InProcessWorker:
    worker = InProcessWorker(application, ["inference-test"], get_channel_layer())
    worker.task = asyncio.create_task(worker.arun())
    return worker


async def test_a_run_on_a_worker_matches_the_local_protocol():
    worker = start_worker()
    comm = await connect()
    await comm.send_json_to(START)
    seen = await until(comm, {"done"})
    kinds = [m["type"] for m in seen if m["type"] != "status"]
    assert kinds[:2] == ["session", "prefill"] and kinds.count("step") == 5
    assert {m.get("worker") for m in seen if m["type"] == "status"} == {"inference-test"}
    await comm.send_json_to({"type": "detail", "what": "attention", "step": 0, "layer": 0, "head": 0})
    assert (await until(comm, {"detail", "error"}))[-1]["type"] == "detail"
    await comm.disconnect()
    worker.cancel()


async def test_a_start_waits_while_the_workers_load_and_runs_when_one_answers():
    """A class pressing Play before the workers have loaded the model: told so, and the run starts by itself."""
    comm = await connect()
    await comm.send_json_to(START)
    told = (await until(comm, {"status"}))[-1]
    assert told["state"] == "loading" and told["message"] == STARTING
    worker = start_worker()  # the model has loaded
    seen = await until(comm, {"done", "error"})
    assert seen[-1]["type"] == "done" and seen[-1]["stop_reason"] == "max_new_tokens", seen[-1]
    await comm.send_json_to(START)  # a later wait (a restart) says so in its own words
    assert (await until(comm, {"done"}))[-1]["type"] == "done"
    worker.cancel()
    await comm.send_json_to(START)
    assert [m for m in await until(comm, {"error"}) if m["type"] == "status" and m["state"] == "loading"][-1]["message"] == RESTARTING
    await comm.disconnect()


async def test_no_worker_is_a_named_error_and_the_socket_stays_usable():
    comm = await connect()
    await comm.send_json_to(START)
    error = (await until(comm, {"error"}))[-1]
    assert error["code"] == "no_worker" and error["message"] == NO_WORKER  # a student's sentence, no command
    await comm.send_json_to({"type": "pause"})
    assert (await until(comm, {"error"}))[-1]["code"] == "no_run"
    worker = start_worker()
    await comm.send_json_to(START)
    assert (await until(comm, {"done"}))[-1]["stop_reason"] == "max_new_tokens"
    await comm.disconnect()
    worker.cancel()


async def test_a_worker_that_goes_silent_is_reported_lost():
    worker = start_worker()
    comm = await connect()
    await comm.send_json_to({**START, "paused": True})
    await until(comm, {"prefill"})
    worker.cancel()  # the worker stops answering pings, as a killed process would
    error = (await until(comm, {"error"}, timeout=30))[-1]
    assert error["code"] == "worker_lost" and error["message"] == WORKER_LOST  # a student's sentence, no channel name
    assert (await comm.receive_json_from(timeout=5))["state"] == "finished"
    await comm.disconnect()


async def test_a_worker_restarted_within_the_timeout_is_reported_lost():
    """Killed and started again on the same channel before the silence timeout (the Procfile's loop): the new
    instance answers the pings but holds none of the sessions, so the visitor is told instead of waiting forever."""
    worker = start_worker()
    comm = await connect()
    await comm.send_json_to({**START, "paused": True})
    await until(comm, {"prefill"})
    worker.cancel()
    again = start_worker()  # a new InferenceWorker on "inference-test": a new instance
    error = (await until(comm, {"error"}, timeout=4))[-1]  # before the 5 s silence timeout could fire
    assert error["code"] == "worker_lost"
    assert (await comm.receive_json_from(timeout=5))["state"] == "finished"
    await comm.send_json_to(START)  # pressing Play again runs on the new instance
    assert (await until(comm, {"done"}))[-1]["stop_reason"] == "max_new_tokens"
    await comm.disconnect()
    again.cancel()


async def test_the_host_page_sees_the_workers_generations_and_devices(settings):
    """In this mode the model lives on the workers: the host's stats come from their answers."""
    worker = start_worker()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    survey = RemoteRun(send=None, channel_name=channel)
    before = generating.active  # a killed worker of an earlier test may still hold a slot in this process
    comm = await connect()
    await comm.send_json_to({**START, "paused": True})
    await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")  # a paused run holds no slot
    assert await survey.survey_workers() == ([], [])  # nothing heard yet: the question is on its way
    await survey.on_worker_frame(await asyncio.wait_for(layer.receive(channel), 10))
    (pong,), silent = await survey.survey_workers()
    assert silent == []
    stats = room_stats.with_workers(room_stats.server_stats(), [pong])
    assert stats["generations"] == {"active": before, "limit": settings.EXPLAINER_MAX_SESSIONS}
    assert stats["workers"][0]["worker"] == "inference-test" and stats["workers"][0]["sessions"] == 1
    one = stats["workers"][0]  # the host page's line per worker: its model, its own memory, its line
    assert one["model"]["name"] == "stories260K" and one["device"]["memory"]["used_bytes"] > 0
    assert one["start_line"] == 0 and one["generations"]["limit"] == settings.EXPLAINER_MAX_SESSIONS
    assert stats["model"]["name"] == "stories260K" and stats["device"]["name"] == "cpu"
    assert stats["device"]["memory"]["processes"] == 1 and stats["start_line"] == 0  # the workers' memory, summed
    assert room_stats.with_workers(stats, [])["generations"] == {"active": 0, "limit": 0}
    await comm.disconnect()
    worker.cancel()


async def test_acks_without_a_worker_never_answer_no_run():
    """A follower's page acks the host's frames, and a lost session's page acks its last ones: no `no_run`."""
    worker = start_worker()
    comm = await connect()
    for received in (8, 16, 24):
        await comm.send_json_to({"type": "ack", "received": received})
    assert await comm.receive_nothing(timeout=1.5)  # no error, and no worker was asked
    await comm.send_json_to(START)
    assert (await until(comm, {"done"}))[-1]["type"] == "done"
    await comm.disconnect()
    worker.cancel()


async def test_a_silent_worker_is_named_for_the_host_page(settings):
    """A configured worker that has not answered for 3 pings is listed as silent (the host's warning)."""
    settings.EXPLAINER_WORKER_CHANNELS = ["inference-test", "inference-gone"]
    worker = start_worker()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    survey = RemoteRun(send=None, channel_name=channel)
    assert await survey.survey_workers() == ([], [])  # just started: nobody is called silent yet
    await survey.on_worker_frame(await asyncio.wait_for(layer.receive(channel), 10))
    survey.surveying_since -= 3.5  # the host page has been asking for 3.5 s
    (pong,), silent = await survey.survey_workers()
    assert pong["worker"] == "inference-test" and silent == ["inference-gone"]
    stats = room_stats.with_workers(room_stats.server_stats(), [pong], silent)
    assert stats["workers_silent"] == ["inference-gone"]
    worker.cancel()


def test_pages_in_worker_mode_never_load_the_model(client):
    """Daphne processes in REDIS_URL mode hold no model: the article and /healthz show the workers' one."""
    from django.core.cache import cache

    cache.delete(model_registry.DESCRIPTION_KEY)
    assert client.get("/").status_code == 200 and client.get("/healthz").status_code == 200
    assert not model_registry.is_loaded() and not model_registry._background
    assert b"still loading" in client.get("/").content
    cache.set(model_registry.DESCRIPTION_KEY, {"name": "stories260K-from-a-worker"})
    assert b"stories260K-from-a-worker" in client.get("/").content
    assert client.get("/healthz").json()["model"]["name"] == "stories260K-from-a-worker"
    assert not model_registry.is_loaded()
    cache.delete(model_registry.DESCRIPTION_KEY)


async def test_frames_from_a_worker_that_is_not_the_sessions_never_reach_the_page():
    """A restarted worker answers messages queued for its previous life: those answers are dropped."""
    sent = []

    async def send(frame):
        sent.append(frame)

    run = RemoteRun(send=send, channel_name="socket-channel")
    run.worker = "inference-1"
    await run.on_worker_frame({"frame": {"type": "error", "code": "no_run"}, "worker": "inference-0"})
    await run.on_worker_frame({"frame": {"type": "step", "step": 1}, "worker": "inference-1"})
    assert sent == [{"type": "step", "step": 1}]
    run.instance = "first-life"  # the worker restarted: its new instance's frames are not this session's
    await run.on_worker_frame({"frame": {"type": "error", "code": "no_run"}, "worker": "inference-1", "instance": "second"})
    await run.on_worker_frame({"frame": {"type": "step", "step": 2}, "worker": "inference-1", "instance": "first-life"})
    assert sent == [{"type": "step", "step": 1}, {"type": "step", "step": 2}]


async def test_a_count_before_any_run_is_answered_by_a_worker_and_holds_none():
    """The page counts the prompt as soon as its socket opens (issue 24): with workers, some live worker answers it,
    and no worker is kept for the socket (so a worker dying later tells this page nothing); with none alive, the
    count says why in its own message, never as an `error` on the page's banner."""
    comm = await connect()
    try:
        await comm.send_json_to({"type": "tokenize", "text": "Once upon a time", "seq": 3})
        alone = (await until(comm, "tokenized", timeout=10))[-1]
        assert alone["tokens"] is None and alone["error"]["code"] == "no_worker"
        worker = start_worker()
        try:
            await comm.send_json_to({"type": "tokenize", "text": "Once upon a time", "seq": 4})
            counted = (await until(comm, "tokenized", timeout=30))[-1]
            assert counted["seq"] == 4 and counted["tokens"] > 0 and "error" not in counted
        finally:
            worker.cancel()
    finally:
        await comm.disconnect()


async def test_a_full_worker_puts_starts_in_the_daphne_line_first_come_first_served(settings):
    """REDIS_URL mode: with the worker's one slot held, starts wait in this process's line (remote_line.py), are
    told their places, a stop leaves the line, and the head's run goes to the worker once the slot is back."""
    from explainer.services.run.remote_line import remote_queue, unanswered

    settings.EXPLAINER_MAX_SESSIONS, settings.EXPLAINER_OUTBOUND_WINDOW = 1, 4
    worker = start_worker()
    holder, second, third = await connect(), await connect(), await connect()
    await holder.send_json_to({**START, "params": {"max_new_tokens": 100, "min_new_tokens": 100}})
    await until(holder, {"session"})
    await holder.send_json_to({"type": "ack", "received": 1})  # then reads nothing: its run holds the slot
    await until(holder, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    await second.send_json_to(START)
    place = (await until(second, lambda m: m["type"] == "status" and m["state"] != "loading"))[-1]
    assert (place["state"], place["position"]) == ("queued", 1) and "1st in line" in place["message"]
    await third.send_json_to(START)
    assert (await until(third, lambda m: m["type"] == "status" and m["state"] == "queued"))[-1]["position"] == 2
    await third.send_json_to({"type": "stop"})
    assert (await until(third, lambda m: m["type"] == "status" and m["state"] == "idle"))[-1]["reason"] == "left_queue"
    await holder.send_json_to({"type": "stop"})
    await holder.send_json_to({"type": "ack", "received": 10_000})
    seen = await until(second, {"done"})  # no second press
    assert [m["type"] for m in seen if m["type"] != "status"][:2] == ["session", "prefill"]
    assert not len(remote_queue) and not unanswered
    for comm in (holder, second, third):
        await comm.disconnect()
    worker.cancel()


@pytest.mark.django_db
def test_the_article_under_workers_shows_the_model_card_make_run_shows(settings, client):
    """make workshop's Daphne never loads the model, yet its article names it with the same card (issue 25 point 9)."""
    from inference.shipped import notice_for

    settings.EXPLAINER_MODEL = "smollm2-135m-instruct"
    card = notice_for(settings.EXPLAINER_MODEL)
    page = client.get("/").content.decode()
    assert "What to expect" in page and card.licence in page and card.origin.split()[0] in page
    assert model_registry.workers_status()["notice"] == card.to_dict()
