"""A start that finds every generation slot taken waits in line (first come first served), is told its place as
the line moves, runs when its turn comes with no second press, and leaves the line on Stop or a closed socket."""
import pytest

from explainer.services.admission.capacity import generating
from explainer.services.admission.start_queue import local_queue, ordinal, queued_status
from explainer.services.workshop import room_stats
from tests.support import connect, settled, until

START = {"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}],
         "params": {"temperature": 0.8, "seed": 1, "max_new_tokens": 4}}
LONG = {**START, "params": {"max_new_tokens": 100, "min_new_tokens": 100}}  # no early end-of-sequence

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py: two generation slots


def queued(m: dict) -> bool:
    return m["type"] == "status" and m["state"] == "queued"


async def hold_every_slot(settings):
    """Two visitors whose runs hold both slots: each acked once and then reads nothing more (window 4)."""
    settings.EXPLAINER_OUTBOUND_WINDOW = 4
    holders = [await connect(), await connect()]
    for comm in holders:
        await comm.send_json_to({"type": "ack", "received": 1})
        await comm.send_json_to(LONG)
        await until(comm, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    assert generating.active == 2
    return holders


async def free_a_slot(holder) -> None:
    await holder.send_json_to({"type": "stop"})
    await holder.send_json_to({"type": "ack", "received": 10_000})
    await until(holder, lambda m: m["type"] == "status" and m["state"] == "finished")


async def two_in_line() -> tuple:
    """Two more visitors start while every slot is held: the third and fourth, with the places they were told."""
    third, fourth = await connect(), await connect()
    await third.send_json_to(START)
    third_place = (await until(third, queued))[-1]
    await fourth.send_json_to(START)
    fourth_place = (await until(fourth, queued))[-1]
    return third, fourth, third_place, fourth_place


async def all_given_back(*comms) -> None:
    for comm in comms:
        await comm.disconnect()
    await settled(lambda: generating.active == 0 and not len(local_queue), "every slot and place given back")


async def test_a_full_house_waits_in_line_and_runs_in_order_with_no_second_press(settings):
    holders = await hold_every_slot(settings)
    third, fourth, first_place, second_place = await two_in_line()
    assert (first_place["position"], first_place["run_state"]) == (1, "queued")
    assert "1st in line" in first_place["message"]
    assert second_place["position"] == 2
    assert room_stats.server_stats()["start_line"] == 2  # the workshop host's page: "waiting in line to start"
    await free_a_slot(holders[0])
    seen = await until(third, "done")
    assert [m["type"] for m in seen if m["type"] != "status"][:2] == ["session", "prefill"]
    assert sum(m["type"] == "step" for m in seen) == 4
    moved = await until(fourth, lambda m: queued(m) or m["type"] == "session")
    # the fourth moved up to the head of the line (or, where third's run was already over, straight to its run)
    assert moved[-1]["type"] == "session" or moved[-1]["position"] == 1
    await until(fourth, "done")  # third's slot came back: fourth's turn, again with no second press
    await free_a_slot(holders[1])
    await all_given_back(*holders, third, fourth)


async def test_stop_leaves_the_line_and_the_next_moves_up(settings):
    holders = await hold_every_slot(settings)
    third, fourth, _, second_place = await two_in_line()
    assert second_place["position"] == 2
    await third.send_json_to({"type": "stop"})
    left = (await until(third, lambda m: m["type"] == "status" and m["state"] == "idle"))[-1]
    assert left["reason"] == "left_queue" and "left the queue" in left["message"]
    assert (await until(fourth, queued))[-1]["position"] == 1
    assert generating.active == 2 and len(local_queue) == 1  # the leaver took no slot and holds no place
    await third.send_json_to(START)  # Play again: back in line, behind the fourth
    assert (await until(third, queued))[-1]["position"] == 2
    for holder in holders:
        await free_a_slot(holder)
    await until(fourth, "done")
    await until(third, "done")
    await all_given_back(*holders, third, fourth)


async def test_a_closed_socket_gives_its_place_back(settings):
    holders = await hold_every_slot(settings)
    third, fourth, _, _ = await two_in_line()
    await third.disconnect()
    assert (await until(fourth, queued))[-1]["position"] == 1
    await settled(lambda: len(local_queue) == 1, "the closed socket's place given back")
    await free_a_slot(holders[0])
    await until(fourth, "done")
    await all_given_back(*holders, fourth)


async def test_past_the_bound_a_start_hears_busy(settings):
    settings.EXPLAINER_START_QUEUE = 1
    holders = await hold_every_slot(settings)
    third, fourth = await connect(), await connect()
    await third.send_json_to(START)
    await until(third, queued)
    await fourth.send_json_to(START)
    busy = (await until(fourth, lambda m: m["type"] in ("busy", "status") and m.get("state") != "ready"))[-1]
    assert busy["type"] == "busy" and "1 starts are waiting" in busy["reason"]
    await third.send_json_to({"type": "stop"})
    await until(third, lambda m: m.get("reason") == "left_queue")
    await all_given_back(*holders, third, fourth)


def test_the_place_reads_as_a_person_says_it():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_the_wait_is_the_runs_ahead_a_slot_at_a_time():
    assert queued_status(3, 2, 4.0)["eta_s"] == 8  # two runs' time: the 3rd waits for a second round of 2 slots
    assert queued_status(2, 2, 4.0)["eta_s"] == 4
    assert "3rd in line; about 8 s" in queued_status(3, 2, 4.0)["message"]
    before_any_run = queued_status(1, 2, None)
    assert before_any_run["eta_s"] is None and "about" not in before_any_run["message"]
