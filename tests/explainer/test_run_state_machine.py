"""A model-based test of the run's controls (issue 11): hypothesis drives a live consumer at random.

Each sequence opens a socket (Channels' WebsocketCommunicator, the tiny real stories260K model) and
applies up to STEPS_PER_SEQUENCE actions: start, pause, resume, step, stop, fork, retemper, ack, not
acking (reading without acks, with a small outbound window so runs get held), and disconnect. After
every action a sentinel frame (an unknown type) is sent; the server answers requests in order, so the
messages before the sentinel's `error` hold the action's answer. The invariants, checked on every
message as it arrives and after every action:
- a paused run never steps (only the step asked for with `step`), and a held run neither;
- at most one step after a stop: `done` says `stopped` with at most the client's last step + 1, and
  on the server side at most one `step` leaves after the stop is read;
- `done` is the run's last message (then only its checks and `status: finished`);
- step indices are contiguous (a fork continues from its step);
- every request gets exactly one answer or a named error;
- the generation slot is free after `done` (by `status: finished`) and after a disconnect.
Derandomized: every run sends the same sequences. The bugs it found are pinned in test_run_controls.py.
"""
import asyncio
import gc
import os

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from explainer.asgi import application
from explainer.services.run import visitor_run
from explainer.services.admission.capacity import generating
from explainer.services.run.visitor_run import live_sessions
from tests.conftest import full_range

ORIGIN = [(b"origin", b"http://127.0.0.1")]
# 200 sequences under CI=true (full_range()); 50 otherwise (derandomized: the first 50 of the same 200).
SEQUENCES = int(os.environ.get("RUN_MACHINE_SEQUENCES", "200" if full_range() else "50"))
STEPS_PER_SEQUENCE = 14
NAMED = {"no_run", "finished", "stopping", "invalid_state", "step_pending", "out_of_range", "not_kept"}
PROMPT = [{"role": "user", "content": "<t403> <t407>"}]
counts = {"sequences": 0, "actions": 0, "messages": 0}


class ServerLog:
    """What VisitorRun sends, and when it reads a stop (the server's side of "at most one step")."""

    def __init__(self):
        self.events: list[tuple[str, dict | None]] = []

    def install(self, monkeypatch):
        send, stop = visitor_run.VisitorRun.send, visitor_run.VisitorRun.stop

        async def logged_send(run, message):
            self.events.append(("sent", message))
            await send(run, message)

        async def logged_stop(run, message):
            await stop(run, message)
            self.events.append(("stop_read", None))

        monkeypatch.setattr(visitor_run.VisitorRun, "send", logged_send)
        monkeypatch.setattr(visitor_run.VisitorRun, "stop", logged_stop)

    def check(self) -> None:
        after_stop = None
        for kind, message in self.events:
            if kind == "stop_read":
                after_stop = 0
            elif after_stop is not None and message["type"] == "step":
                after_stop += 1
                assert after_stop <= 1, "more than one step left the server after it read a stop"
            elif message["type"] in ("done", "session"):
                after_stop = None
        self.events.clear()


class Observer:
    """The client's view of the stream, checking the invariants message by message."""

    def __init__(self):
        self.received = 0
        self.new_run()

    def new_run(self):
        self.last_step, self.run_over, self.live = 0, True, False
        self.paused = self.held = False
        self.asked = self.forks = 0
        self.stop_seen = None

    def see(self, m: dict) -> None:
        self.received += 1
        counts["messages"] += 1
        kind = m["type"]
        if kind == "session":
            self.new_run()
            self.run_over, self.live = False, True
        elif kind == "step":
            self._see_step(m)
        elif kind == "status":
            self._see_status(m)
        elif kind == "done":
            assert not self.run_over, "a second done"
            if self.stop_seen is not None:
                assert m["steps"] <= self.stop_seen + 1, (m, self.stop_seen)
            self.run_over, self.live, self.asked, self.last_step = True, False, 0, m["steps"]
        elif kind == "error":
            assert m["code"] in NAMED or m["code"] == "unknown_type", m

    def _see_step(self, m: dict) -> None:
        if m.get("forced") and self.forks:
            self.forks -= 1
            assert m["step"] <= self.last_step + 1, m["step"]
            self.run_over, self.live = False, True
        else:
            assert not self.run_over, f"step {m['step']} after the run's done"
            assert m["step"] == self.last_step + 1, (m["step"], self.last_step)
            assert not self.held, "a held run stepped"
            if self.paused:
                assert self.asked > 0, f"a paused run sent step {m['step']} nobody asked for"
                self.asked -= 1
        self.last_step = m["step"]

    def _see_status(self, m: dict) -> None:
        state = m.get("run_state", m["state"])
        if state == "finished":
            assert self.run_over, "finished before done"
            assert generating.active == 0, "the generation slot is still taken after done"
            return
        if state in ("running", "paused", "held"):
            assert not self.run_over, f"status {state} after the run's done"
            self.paused, self.held = state == "paused", state == "held"


class RunMachine(RuleBasedStateMachine):
    loop: asyncio.AbstractEventLoop
    log: ServerLog

    def __init__(self):
        super().__init__()
        counts["sequences"] += 1
        self.serial = 0
        self.comm = self.wait(self.connect())

    def wait(self, coro):
        return self.loop.run_until_complete(coro)

    async def connect(self):
        comm = WebsocketCommunicator(application, "/ws/session/", headers=ORIGIN)
        assert (await comm.connect())[0]
        self.seen = Observer()
        assert (await self.receive(comm))["state"] == "ready"
        await comm.send_json_to({"type": "ack", "received": 1})  # an acking client: the small window holds
        return comm

    async def receive(self, comm=None):
        message = await (comm or self.comm).receive_json_from(timeout=30)
        self.seen.see(message)
        return message

    def exchange(self, message: dict | None, until_done: bool = False) -> list[dict]:
        """Send the message, then a sentinel; the messages before the sentinel's error (and up to done)."""
        counts["actions"] += 1

        async def go():
            self.serial += 1
            sentinel = f"sentinel-{self.serial}"
            if message is not None:
                await self.comm.send_json_to(message)
            await self.comm.send_json_to({"type": sentinel})
            answers = []
            while (m := await self.receive())["type"] != "error" or repr(sentinel) not in m["message"]:
                answers.append(m)
            if until_done and not any(m["type"] in ("done", "error") for m in answers):
                while (m := await self.receive())["type"] != "done":
                    answers.append(m)
                answers.append(m)
            return answers
        answers = self.wait(go())
        self.log.check()
        return answers

    # ---- the actions -------------------------------------------------------------------------
    @rule(paused=st.booleans(), tokens=st.integers(2, 10), seed=st.integers(0, 3))
    def start(self, paused, tokens, seed):
        answers = self.exchange({"type": "start", "messages": PROMPT, "paused": paused,
                                 "params": {"seed": seed, "temperature": 0.9, "max_new_tokens": tokens}})
        assert one_answer(answers, lambda m: m["type"] == "session"), answers

    @rule()
    def pause(self):
        answers = self.exchange({"type": "pause"})
        assert one_answer(answers, lambda m: m.get("run_state") == "paused" and m["type"] == "status"), answers

    @rule()
    def resume(self):
        answers = self.exchange({"type": "resume"})
        statuses = [m for m in answers if m["type"] == "status" and m.get("run_state") in ("running", "held")]
        assert (len(errors(answers)) == 1) != bool(statuses), answers

    @rule()
    def step(self):
        was_paused = self.seen.paused and self.seen.live
        if was_paused:
            self.seen.asked += 1
        answers = self.exchange({"type": "step"})
        asked = [m for m in answers if m["type"] == "step" and not m.get("forced")]
        if errors(answers):
            assert len(errors(answers)) == 1, answers
            if was_paused:
                self.seen.asked = 0
        else:
            assert was_paused and len(asked) == 1, answers

    @rule(with_step=st.booleans())
    def stop(self, with_step):
        message = {"type": "stop"}
        if with_step and self.seen.live:
            message["step"] = self.seen.stop_seen = self.seen.last_step
        answers = self.exchange(message, until_done=True)
        done = [m for m in answers if m["type"] == "done"]
        if errors(answers):  # no live run: a done in the answers is the run's own end, not the stop's
            assert len(errors(answers)) == 1 and all(d["stop_reason"] != "stopped" for d in done), answers
            self.seen.stop_seen = None
        else:  # stopped, or the step in flight was the run's last anyway
            assert len(done) == 1 and done[0]["stop_reason"] in ("stopped", "eos", "max_new_tokens"), answers

    @rule(back=st.integers(0, 16), token=st.integers(3, 400))
    def fork(self, back, token):
        step = max(1, self.seen.last_step - back)  # drawn apart from the timing: hypothesis replays draws
        self.seen.forks += 1
        answers = self.exchange({"type": "fork", "step": step, "token_id": token})
        forked = [m for m in answers if m["type"] == "step" and m.get("forced")]
        if forked:
            assert len(forked) == 1 and not errors(answers) and forked[0]["step"] == step, answers
            assert any(m["type"] == "status" and m.get("run_state") == "paused" for m in answers), answers
        else:
            self.seen.forks -= 1
            assert len(errors(answers)) == 1, answers

    @rule(back=st.integers(0, 16))
    def retemper(self, back):
        step = max(1, self.seen.last_step - back)
        answers = self.exchange({"type": "retemper", "step": step, "temperature": 0.5})
        assert one_answer(answers, lambda m: m["type"] == "retemper"), answers

    @rule()
    def ack(self):
        self.exchange({"type": "ack", "received": self.seen.received})

    @rule()
    def read_without_acking(self):
        """Read what comes for a moment and ack nothing: a running run fills the window and is held."""
        self.exchange(None)

    @rule()
    def disconnect(self):
        counts["actions"] += 1
        self.wait(self.comm.disconnect())
        assert generating.active == 0 and open_sessions() == 0, "a disconnect left the slot or the session"
        self.comm = self.wait(self.connect())

    def teardown(self):
        self.wait(self.comm.disconnect())
        assert generating.active == 0 and open_sessions() == 0


def open_sessions() -> int:
    """live_sessions() without garbage: runs other tests dropped unclosed wait in reference cycles until a collection
    (only then: a full collection is 0.1-0.5 s here, and it was two thirds of this machine's time)."""
    if live_sessions():
        gc.collect()
    return live_sessions()


def errors(answers):
    return [m for m in answers if m["type"] in ("error", "busy")]


def one_answer(answers, is_answer) -> bool:
    """Exactly one answer, or exactly one named refusal and no answer."""
    found = [m for m in answers if is_answer(m)]
    return len(found) + len(errors(answers)) == 1


def logged_machine_settings(stories_model, monkeypatch, log: ServerLog, window: int) -> ServerLog:
    """A small outbound window (runs that are not acked get held), no rate limit, 16 tokens at most; `log` installed."""
    stories_model.EXPLAINER_OUTBOUND_WINDOW = window
    stories_model.EXPLAINER_RATE_PER_S = 0
    stories_model.EXPLAINER_MAX_NEW_TOKENS = 16
    log.install(monkeypatch)
    return log


@pytest.fixture
def machine_settings(stories_model, monkeypatch):
    return logged_machine_settings(stories_model, monkeypatch, ServerLog(), 8)


def run_machine(machine: type, log: ServerLog, sequences: int) -> None:
    """`sequences` derandomized sequences of `machine` on a loop of their own (the same ones on every run)."""
    loop = asyncio.new_event_loop()
    machine.loop, machine.log = loop, log
    counts.update(sequences=0, actions=0, messages=0)
    try:
        run_state_machine_as_test(machine, settings=settings(
            max_examples=sequences, stateful_step_count=STEPS_PER_SEQUENCE, derandomize=True, database=None,
            deadline=None, print_blob=False, suppress_health_check=list(HealthCheck)))
    finally:
        loop.close()


@pytest.mark.slow
def test_the_run_state_machine(machine_settings):
    run_machine(RunMachine, machine_settings, SEQUENCES)
    print(f"\nrun state machine: {counts['sequences']} sequences, {counts['actions']} actions, "
          f"{counts['messages']} messages checked")
    assert counts["sequences"] >= SEQUENCES


# Shortest failing sequences the machine found on the control plane before issue 11 (resume, fork and
# pause-step-stop fail there on every replay; pause and stop depend on timing there), plus the issue's own
# scenarios. hypothesis' @example does not apply to state machines, so they are replayed here.
FOUND = {
    "pause's status came before the step in flight": [("start", dict(paused=False, seed=0, tokens=2)), ("pause", {})],
    "resume answered out of order": [("start", dict(paused=False, seed=0, tokens=2)), ("resume", {})],
    "a fork mixed with the step in flight": [("start", dict(paused=False, seed=0, tokens=2)), ("fork", dict(back=0, token=3))],
    "stop ran on past the client's step": [("start", dict(paused=False, seed=0, tokens=10)), ("stop", dict(with_step=True))],
    "stop while held": [("start", dict(paused=False, seed=1, tokens=10)), ("read_without_acking", {}), ("stop", dict(with_step=False))],
    "pause, step, stop": [("start", dict(paused=False, seed=2, tokens=10)), ("pause", {}), ("step", {}), ("stop", dict(with_step=True))],
}


@pytest.mark.parametrize("name", list(FOUND))
def test_the_sequences_that_found_bugs(machine_settings, name):
    loop = asyncio.new_event_loop()
    RunMachine.loop, RunMachine.log = loop, machine_settings
    try:
        machine = RunMachine()
        for action, arguments in FOUND[name]:
            getattr(machine, action)(**arguments)
        machine.teardown()
    finally:
        loop.close()
