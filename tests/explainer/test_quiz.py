"""The class quiz (issue 26): the host asks at a paused broadcast, followers answer, the host reveals.

Read on the followers' sockets: between the question and the reveal no frame carries the asked step's logits,
stages, probabilities or draw; each socket has one answer (a second one changes it); answers after the reveal
are refused by name; answer frames are rate-limited like any; 30 answers in one second all count; the recap
CSV has the class's counts beside the model's odds.
"""
import asyncio
import csv
import html
import io
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from explainer.models import QuizAnswer, QuizQuestion
from tests.explainer.test_workshop import (BROADCAST, DB, close, drain, follow, log_in, host_socket, no_leftovers,  # noqa: F401
                                           of_type, visitor, workshop_on)
from tests.support import until

ODDS = ("logits", "stages", "probs", "draw")


async def paused_broadcast(followers: int):
    """A host (and its browser's session) with a broadcast paused after its prefill, and `followers` following."""
    guests = [await visitor() for _ in range(followers)]
    for guest in guests:
        await follow(guest)
    session = await sync_to_async(log_in)()
    host = await host_socket(session)
    await host.send_json_to({**BROADCAST, "paused": True, "params": {**BROADCAST["params"], "max_new_tokens": 20}})
    await until(host, lambda m: m["type"] == "status" and m.get("run_state") == "paused")
    for guest in guests:
        await until(guest, lambda m: m["type"] == "status" and m.get("run_state") == "paused")
    return host, guests, session


def quiz_of(message):
    return (message.get("broadcast") or {}).get("quiz") if message["type"] == "workshop" else None


async def question_on(comm):
    """The open question as this page is told it (and everything the socket carried up to it)."""
    seen = await until(comm, lambda m: (quiz_of(m) or {}).get("state") == "open")
    return quiz_of(seen[-1]), seen


def odds_in(frames: list[dict]) -> list[dict]:
    """Frames that carry a step's odds or its draw (a step, its parts, a done)."""
    return [f for f in frames if f["type"] in ("step", "part", "done") or any(k in f for k in ODDS)]


async def answer(comm, question, **fields):
    await comm.send_json_to({"type": "answer", "question": question["id"], **fields})
    return (await until(comm, lambda m: m["type"] in ("answered", "error")))[-1]


@DB
async def test_the_room_guesses_without_the_odds_then_sees_them_beside_its_answers():
    host, guests, session = await paused_broadcast(3)
    await host.send_json_to({"type": "ask"})
    question, _ = await question_on(guests[0])
    assert len(question["candidates"]) == 10 and question["context"]["prompt"] == BROADCAST["messages"][0]["content"]
    assert "prob" not in json.dumps(question) and question["step"] == 1
    picks = [question["candidates"][i]["key"] for i in (0, 3, 3)]
    replies = [await answer(g, question, choice=k) for g, k in zip(guests, picks)]
    assert [r["changed"] for r in replies] == [False] * 3 and [r["key"] for r in replies] == picks
    changed = await answer(guests[0], question, choice=question["candidates"][3]["key"], nickname="Ada")
    assert changed["changed"] is True  # a change, not a second vote
    stats = await until(host, lambda m: m["type"] == "host_stats" and (m.get("quiz") or {}).get("answered") == 3)
    assert stats[-1]["quiz"]["counts"] == {str(picks[1]): 3}
    for verb in ("step", "resume"):  # the broadcast waits for the reveal
        await host.send_json_to({"type": verb})
        assert (await until(host, of_type("error")))[-1]["code"] == "quiz_open"
    before_reveal = [await drain(g) for g in guests]
    assert all(odds_in(frames) == [] for frames in before_reveal), "a follower's socket carried the step before the reveal"

    await host.send_json_to({"type": "reveal"})
    revealed = await until(guests[1], lambda m: (quiz_of(m) or {}).get("state") == "revealed")
    outcome = quiz_of(revealed[-1])["outcome"]
    if not any(m["type"] == "step" for m in revealed):  # the held frames go to the room as the reveal goes out
        revealed += await until(guests[1], of_type("step"))
    step = next(m for m in revealed if m["type"] == "step")
    assert step["step"] == 1 and outcome["token"]["id"] == step["token"]["id"] and outcome["u"] == step["draw"]["u"]
    by_id = {c["id"]: c for c in outcome["candidates"]}
    by_key = {c["key"]: c for c in outcome["candidates"]}
    assert step["token"]["id"] in by_id  # the drawn token is always among the choices
    for top in step["logits"]["top"][:8]:
        assert by_id[top["id"]]["model_prob"] == top["prob"]
    assert outcome["answered"] == 3 and outcome["counts"] == {str(picks[1]): 3}

    late = await answer(guests[2], question, choice=0)
    assert late["type"] == "error" and late["code"] == "quiz_closed" and "revealed" in late["message"]
    assert await sync_to_async(QuizAnswer.objects.count)() == 3

    rows = list(csv.DictReader(io.StringIO(await sync_to_async(recap_csv)(session))))
    assert len(rows) == 10 and {r["question"] for r in rows} == {question["id"]}
    counted = {int(r["token_id"]): int(r["class_count"]) for r in rows}
    assert counted[by_key[picks[1]]["id"]] == 3 and sum(counted.values()) == 3
    assert [r["drawn"] for r in rows].count("True") == 1

    printable, recap = await sync_to_async(recap_pages)(session)
    assert html.escape(BROADCAST["messages"][0]["content"]) in printable and "(drawn)" in printable  # text, never markup
    assert recap["questions"][0]["named"] == [{"nickname": "Ada", "token": by_key[picks[1]]["text"]}]
    await host.send_json_to({"type": "reset"})  # the workshop's Reset deletes the class's answers
    await until(guests[0], lambda m: m["type"] == "workshop" and not m["broadcast"])
    assert await sync_to_async(QuizQuestion.objects.count)() == 0
    await close(host, *guests)


def recap_pages(session: str) -> tuple[str, dict]:
    """The printable page and the JSON, for the host; a visitor without the host's session is sent to log in."""
    assert Client().get("/host/quiz.json").status_code == 302
    browser = Client()
    browser.cookies["sessionid"] = session
    page, data = browser.get("/host/quiz/"), browser.get("/host/quiz.json")
    assert page.status_code == data.status_code == 200
    return page.content.decode(), data.json()


def recap_csv(session: str) -> str:
    browser = Client()
    browser.cookies["sessionid"] = session
    response = browser.get("/host/quiz.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return response.content.decode()


@DB
async def test_thirty_followers_answering_in_one_second_all_count(settings):
    settings.EXPLAINER_MAX_CONNECTIONS_PER_IP = 64
    host, guests, _ = await paused_broadcast(30)
    await host.send_json_to({"type": "ask"})
    questions = [(await question_on(g))[0] for g in guests]
    assert len({q["id"] for q in questions}) == 1
    question = questions[0]
    keys = [c["key"] for c in question["candidates"]]
    replies = await asyncio.gather(*(answer(g, question, choice=keys[i % 10]) for i, g in enumerate(guests)))
    assert all(r["type"] == "answered" for r in replies), [r for r in replies if r["type"] != "answered"]
    await host.send_json_to({"type": "reveal"})
    outcome = quiz_of((await until(guests[0], lambda m: (quiz_of(m) or {}).get("state") == "revealed"))[-1])["outcome"]
    assert outcome["answered"] == 30 and sum(outcome["counts"].values()) == 30
    await close(host, *guests)


@DB
async def test_answers_are_checked_and_rate_limited(settings):
    host, (guest,), _ = await paused_broadcast(1)
    await host.send_json_to({"type": "ask"})
    question, _ = await question_on(guest)
    for bad, field in (({"choice": 10}, "choice"), ({"choice": 1, "text": "x"}, "choice"), ({"text": ""}, "text"),
                       ({"choice": 1, "nickname": "n" * 25}, "nickname"), ({"question": "nope", "choice": 1}, "question")):
        await guest.send_json_to({"type": "answer", "question": question["id"], **bad})
        error = (await until(guest, of_type("error")))[-1]
        assert error["field"] == field, (bad, error)
    unknown = await answer(guest, question, text="water")  # stories260K's tokenizer reads it as <unk>
    assert unknown["code"] == "invalid_value" and unknown["field"] == "text" and "not a token" in unknown["message"]
    settings.EXPLAINER_RATE_PER_S, settings.EXPLAINER_RATE_BURST = 1, 3
    flood = await visitor()
    for _ in range(6):
        await flood.send_json_to({"type": "answer", "question": question["id"], "choice": 0})
    codes = [m.get("code") for m in await until(flood, lambda m: m.get("code") == "rate_limited")]
    assert "rate_limited" in codes
    await close(host, guest, flood)


def test_a_typed_word_is_read_as_the_models_token(settings):
    """Typed without its space mid-reply, ' water' is what the model would write; at the reply's start, 'water'."""
    from explainer.services.workshop.quiz import _tokenizer_for, match_typed
    settings.EXPLAINER_MODEL = "bundled"
    tokenizer = _tokenizer_for("bundled")
    spaced, bare = tokenizer.encode(" water", add_special_tokens=False), tokenizer.encode("water", add_special_tokens=False)
    assert len(spaced) == len(bare) == 1 and spaced != bare
    assert match_typed("water", "It is made of") == (spaced[0], " water", 1)
    assert match_typed("water", "") == (bare[0], "water", 1)
    assert match_typed(" water", "") == (spaced[0], " water", 1)
    several = match_typed("waterproofing", "It is made of")
    assert several[2] > 1 and several[0] == tokenizer.encode(" waterproofing", add_special_tokens=False)[0]


@DB
async def test_a_new_broadcast_drops_the_open_question_and_its_answers():
    host, (guest,), _ = await paused_broadcast(1)
    await host.send_json_to({"type": "ask"})
    question, _ = await question_on(guest)
    assert (await answer(guest, question, choice=1))["type"] == "answered"
    await host.send_json_to({**BROADCAST, "paused": True})  # the host starts over before revealing
    await until(guest, lambda m: m["type"] == "workshop" and m["broadcast"] and "quiz" not in m["broadcast"])
    late = await answer(guest, question, choice=2)
    assert late["code"] == "quiz_closed"
    assert await sync_to_async(QuizQuestion.objects.count)() == 0
    await close(host, guest)
