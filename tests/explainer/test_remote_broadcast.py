"""A host's broadcast on an inference worker (REDIS_URL mode, in one process as in test_remote_run.py): its frames
come back to the broadcast's own channel, not the host's socket, so the room keeps it while the host's page is
gone and the host's next page drives it on (issue 25 point 4)."""
from explainer.services.admission.capacity import generating
from explainer.services.run.remote_line import remote_queue
from tests.explainer.test_remote_run import remote_mode, start_worker  # noqa: F401 (fixture)
from tests.explainer.test_workshop import (  # noqa: F401 (fixtures)
    BROADCAST, DB, MESSAGES, close, drain, follow, logged_in_host, no_leftovers, of_type, until, visitor, workshop_on)
from tests.support import settled

PAUSED = {"type": "broadcast", "messages": MESSAGES, "paused": True, "params": {"seed": 3, "max_new_tokens": 3}}


@DB
async def test_a_workers_broadcast_outlives_the_hosts_page_and_the_next_page_drives_it():
    worker = start_worker()
    follower = await visitor()
    await follow(follower)
    host = await logged_in_host()
    await host.send_json_to(PAUSED)
    paused = (await until(follower, lambda m: m["type"] == "status" and m["state"] == "paused"))[-1]
    assert paused["worker"] == "inference-test"
    await close(host)
    await until(follower, lambda m: m["type"] == "workshop" and "host_away_until" in m["broadcast"])
    back = await logged_in_host()
    await until(follower, lambda m: m["type"] == "workshop" and "host_away_until" not in m["broadcast"])
    await back.send_json_to({"type": "step"})
    assert (await until(follower, of_type("step")))[-1]["step"] == 1
    assert (await until(back, of_type("step")))[-1]["step"] == 1  # the host's new page gets the frames too
    await back.send_json_to({"type": "resume"})
    closing = (await until(follower, lambda m: m["type"] == "status" and m["state"] == "finished"))[-1]
    assert closing.get("reason") is None, closing
    await close(follower, back)
    worker.cancel()


HOLD = {"type": "start", "messages": MESSAGES, "params": {"max_new_tokens": 100, "min_new_tokens": 100}}  # no early eos


@DB
async def test_a_broadcast_never_waits_in_the_workers_line_nor_shows_the_room_a_place(settings):
    """The worker's slot held and a visitor waiting in line: the host's broadcast does not join the line
    behind them (its followers would read "You are 2nd in line"): it is refused to the host alone, at once."""
    settings.EXPLAINER_MAX_SESSIONS, settings.EXPLAINER_OUTBOUND_WINDOW = 1, 4
    worker = start_worker()
    holder = await visitor()
    await holder.send_json_to(HOLD)
    await until(holder, {"session"})
    await holder.send_json_to({"type": "ack", "received": 1})  # then reads nothing: its run holds the slot
    await until(holder, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    waiting = await visitor()
    await waiting.send_json_to(HOLD)
    await until(waiting, lambda m: m["type"] == "status" and m["state"] == "queued")
    follower = await visitor()
    await follow(follower)
    host = await logged_in_host()
    await host.send_json_to(BROADCAST)
    refused = (await until(host, lambda m: m["type"] in ("busy", "session")))[-1]
    assert refused["type"] == "busy", refused
    assert len(remote_queue) == 1  # only the visitor who was waiting
    seen = await drain(follower)
    assert not [m for m in seen if m["type"] == "status" and m["state"] == "queued"], seen
    await close(holder, waiting, follower, host)
    await settled(lambda: not len(remote_queue) and generating.active == 0, "every slot and place given back")
    worker.cancel()
