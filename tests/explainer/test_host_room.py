"""The host sees the whole room: visitors over every Daphne process, "reset workshop"."""
from django.core.cache import cache

from explainer.services.workshop import presence
from tests.explainer.test_workshop import (  # noqa: F401 (fixtures)
    DB, MESSAGES, close, follow, logged_in_host, no_leftovers, of_type, until, visitor, workshop_on)


@DB
async def test_visitors_are_counted_over_every_daphne_process():
    """Another Daphne process's census (its slot in the shared cache) is added to this one's."""
    other = presence.Census()
    other.me = "other-daphne"
    cache.add("census:7", {"process": "other-daphne", "connected": 5, "following": 3}, 5)
    guest = await visitor()
    await follow(guest)
    host = await logged_in_host()
    stats = (await until(host, lambda m: m["type"] == "host_stats" and m["visitors"]["connected"] == 6))[-1]
    assert stats["visitors"]["following"] == 4 and stats["visitors"]["processes"] == 2
    here = stats["visitors"]["this_process"]
    assert (here["connected"], here["following"], here["behind"]) == (1, 1, 0)
    cache.delete("census:7")  # that process stopped renewing: its visitors leave the count
    stats = (await until(host, lambda m: m["type"] == "host_stats" and m["visitors"]["processes"] == 1))[-1]
    assert stats["visitors"]["connected"] == 1
    await close(guest, host)


@DB
async def test_the_host_sees_who_is_behind_and_how_many_pages_closed(settings):
    """A follower whose page stops reading falls behind the broadcast (its frames wait for its acks); a page that
    closes is counted."""
    settings.EXPLAINER_OUTBOUND_WINDOW = 4
    reader, stalled, leaver = await visitor(), await visitor(), await visitor()
    for comm in (reader, stalled):
        await follow(comm)
    await stalled.send_json_to({"type": "ack", "received": 1})  # then it reads nothing more
    host = await logged_in_host()
    closed_before = (await until(host, of_type("host_stats")))[-1]["visitors"]["closed"]
    await close(leaver)
    await host.send_json_to({"type": "broadcast", "messages": MESSAGES, "params": {"max_new_tokens": 12, "min_new_tokens": 12}})
    read = 0
    while True:  # the reader acks as a page does
        m = await reader.receive_json_from(timeout=30)
        read += 1
        await reader.send_json_to({"type": "ack", "received": read})
        if m["type"] == "status" and m["state"] == "finished":
            break
    stats = (await until(host, lambda m: m["type"] == "host_stats" and m["visitors"]["behind"] == 1))[-1]
    assert stats["visitors"]["following"] == 2 and stats["visitors"]["closed"] == closed_before + 1
    await close(reader, stalled, host)


def test_each_process_claims_its_own_slot_and_keeps_it():
    cache.clear()
    first, second = presence.Census(), presence.Census()
    first.publish(), second.publish(), first.publish()
    assert first.slot is not None and second.slot is not None and first.slot != second.slot
    slot = first.slot
    first.publish()
    assert first.slot == slot
    cache.clear()


@DB
async def test_reset_workshop_clears_pins_limits_and_the_broadcast():
    guest = await visitor()
    host = await logged_in_host()
    await host.send_json_to({"type": "pin", "params": {"temperature": 0}})
    await host.send_json_to({"type": "limits", "max_new_tokens": 3, "max_sessions": 1, "own_runs_allowed": False})
    await host.send_json_to({"type": "broadcast", "messages": MESSAGES, "paused": True, "params": {"max_new_tokens": 4}})
    await until(guest, lambda m: m["type"] == "workshop" and m["broadcast"].get("state") == "paused")
    await host.send_json_to({"type": "reset"})
    news = (await until(guest, lambda m: m["type"] == "workshop" and not m["broadcast"]))[-1]
    assert news["pins"] == {} and news["limits"] == {"max_new_tokens": None, "max_sessions": None, "own_runs_allowed": True}
    # The host's stats come on their own clock: one sent before the pin arrived has no pins either.
    stats = (await until(host, lambda m: m["type"] == "host_stats" and not m["pins"] and not m["broadcast"]))[-1]
    assert stats["broadcast"] == {} and stats["limits"]["own_runs_allowed"] is True
    await close(guest, host)
