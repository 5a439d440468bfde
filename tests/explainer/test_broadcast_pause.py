"""The teacher's pause is the teacher's (issue 25 point 4): a host's paused broadcast never ends by the idle
timeout while the host is connected (a visitor's own paused run beside it still does), waits for a host who left
(EXPLAINER_HOST_GONE_S) and then ends with a note; the host's refusals reach the host only, and a run that ended by
itself is "finished (eos / max tokens)", never "failed"."""
from explainer.services.run.visitor_run import live_sessions
from tests.support import settled
from tests.explainer.test_workshop import (  # noqa: F401 (fixtures)
    DB, MESSAGES, close, drain, follow, logged_in_host, no_leftovers, of_type, until, visitor, workshop_on)

PAUSED = {"type": "broadcast", "messages": MESSAGES, "paused": True, "params": {"seed": 3, "max_new_tokens": 4}}


def ended(m) -> bool:
    return m["type"] == "status" and m["state"] == "finished"


@DB
async def test_a_paused_broadcast_outlives_the_idle_timeout_that_ends_a_visitors_own_run(settings):
    settings.EXPLAINER_IDLE_RUN_S = 0.5
    follower, own = await visitor(), await visitor()
    await follow(follower)
    host = await logged_in_host()
    await host.send_json_to(PAUSED)
    await until(follower, lambda m: m["type"] == "status" and m["state"] == "paused")
    await own.send_json_to({"type": "start", "text": "Once upon a time", "paused": True, "params": {"max_new_tokens": 4}})
    closing = (await until(own, ended))[-1]  # the clock the broadcast is exempt from has run out, and more
    assert closing["reason"] == "idle_timeout"
    await host.send_json_to({"type": "step"})  # the teacher has finished explaining
    seen = await until(follower, lambda m: m["type"] in ("step", "status") and (m["type"] == "step" or ended(m)))
    assert seen[-1]["type"] == "step" and not any(ended(m) for m in seen), seen[-1]
    await host.send_json_to({"type": "resume"})
    closing = (await until(follower, ended))[-1]
    assert closing.get("reason") != "idle_timeout", closing
    await close(follower, own, host)


@DB
async def test_the_hosts_refusals_reach_the_host_only_and_a_finish_stays_finished():
    follower = await visitor()
    await follow(follower)
    host = await logged_in_host()
    await host.send_json_to({**PAUSED, "paused": False})
    await until(follower, ended)
    done = next(m for m in await until(host, ended) if m["type"] == "done")
    await host.send_json_to({"type": "step"})  # Step on a finished broadcast: refused, to the host
    assert (await until(host, of_type("error")))[-1]["code"] == "finished"
    stats = (await until(host, lambda m: m["type"] == "host_stats" and m["broadcast"].get("stop_reason")))[-1]
    assert stats["broadcast"]["state"] == "finished" and stats["broadcast"]["stop_reason"] == done["stop_reason"]
    assert not [m for m in await drain(follower) if m["type"] == "error"]  # the room never reads the host's refusal
    await close(follower, host)


def broadcast_news(check):
    return lambda m: m["type"] == "workshop" and check(m["broadcast"])


async def host_leaves_a_paused_broadcast():
    """A follower of a paused broadcast whose host's socket has just closed."""
    follower = await visitor()
    await follow(follower)
    host = await logged_in_host()
    await host.send_json_to(PAUSED)
    await until(follower, lambda m: m["type"] == "status" and m["state"] == "paused")
    await close(host)
    return follower


@DB
async def test_a_host_who_leaves_and_comes_back_takes_the_paused_broadcast_back(settings):
    """A reload or a dropped connection is not the end of the class: the room keeps the broadcast, is told until
    when, and the host's next page drives it on."""
    follower = await host_leaves_a_paused_broadcast()
    away = (await until(follower, broadcast_news(lambda b: "host_away_until" in b)))[-1]
    assert away["host_live"] and away["broadcast"]["state"] == "paused"
    assert away["broadcast"]["host_away_until"] > 0
    back = await logged_in_host()
    stats = (await until(back, of_type("host_stats")))[-1]
    assert stats["broadcast"]["id"] == away["broadcast"]["id"] and "host_away_until" not in stats["broadcast"]
    await until(follower, broadcast_news(lambda b: "host_away_until" not in b))
    await back.send_json_to({"type": "step"})  # the teacher's next page drives the same run
    assert (await until(follower, of_type("step")))[-1]["step"] == 1
    await back.send_json_to({"type": "resume"})
    closing = (await until(follower, ended))[-1]
    assert closing.get("reason") is None, closing
    await close(follower, back)


@DB
async def test_a_broadcast_ends_with_a_note_once_the_host_has_been_gone_too_long(settings):
    settings.EXPLAINER_HOST_GONE_S = 0.5
    follower = await host_leaves_a_paused_broadcast()
    news = (await until(follower, broadcast_news(lambda b: b.get("state") == "ended")))[-1]
    assert news["broadcast"]["stop_reason"] == "host_left" and news["host_live"] is False
    await settled(lambda: live_sessions() == 0, "the broadcast's session closed")
    await close(follower)


@DB
async def test_with_no_grace_the_broadcast_ends_when_the_host_leaves(settings):
    settings.EXPLAINER_HOST_GONE_S = 0
    follower = await host_leaves_a_paused_broadcast()
    news = (await until(follower, broadcast_news(lambda b: b.get("state") == "ended")))[-1]
    assert news["broadcast"]["stop_reason"] == "host_left" and "host_away_until" not in news["broadcast"]
    await close(follower)


@DB
async def test_a_broadcast_left_by_a_restarted_server_reads_as_ended_and_pages_are_told():
    """`make run` with a host password restarted mid-class (no `make workshop` to clear it): the database still
    says "paused", but no process runs it, so nothing would ever arrive for a follower. It reads as ended (its
    relay no longer says it is alive), with why; a broadcast of this process still reads live."""
    from explainer.services.workshop import policy

    await policy.save_broadcast({"id": "542efb59f1ad", "host": "specific.gone!relay", "started_at": 1.0,
                                 "state": "paused", "step": 3, "messages": MESSAGES, "text": "", "params": {}})
    follower = await visitor()
    await follower.send_json_to({"type": "follow", "on": True})
    news = (await until(follower, of_type("workshop")))[-1]
    assert (news["broadcast"]["state"], news["broadcast"]["stop_reason"]) == ("ended", policy.SERVER_RESTARTED)
    host = await logged_in_host()
    await host.send_json_to(PAUSED)
    await until(follower, lambda m: m["type"] == "status" and m["state"] == "paused")
    assert (await policy.snapshot())["broadcast"]["state"] == "paused"
    await close(follower, host)
