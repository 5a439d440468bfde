"""A host's broadcast on an inference worker (REDIS_URL mode, in one process as in test_remote_run.py): its frames
come back to the broadcast's own channel, not the host's socket, so the room keeps it while the host's page is
gone and the host's next page drives it on (issue 25 point 4)."""
from tests.explainer.test_remote_run import remote_mode, start_worker  # noqa: F401 (fixture)
from tests.explainer.test_workshop import (  # noqa: F401 (fixtures)
    DB, MESSAGES, close, follow, logged_in_host, no_leftovers, of_type, until, visitor, workshop_on)

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
