"""The run state machine (test_run_state_machine.py) driving compared runs (issue 29): every start asks for run B
too (another temperature or the int8 weights), and every fork forks both.

On top of a lone run's invariants, each run checked on its own stream (B's messages carry `run: "b"`):
- each of A and B steps contiguously, a paused pair steps only when asked (one step of each), a held pair not at all;
- every `compare` follows A's and B's step of the same number;
- at most one step of each run leaves the server after it reads a stop;
- both generation slots are free by `status: finished` and after a disconnect.
"""
import os

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from tests.conftest import full_range
from tests.explainer.test_run_state_machine import (PROMPT, Observer, RunMachine, ServerLog, counts, errors,
                                                    logged_machine_settings, run_machine)

compared = {"steps": 0}  # compare messages checked
SEQUENCES = int(os.environ.get("PAIR_MACHINE_SEQUENCES", "80" if full_range() else "25"))


class PairLog(ServerLog):
    """The server's side: at most one step of each run after a stop is read (run A's counted, B's alike)."""

    def check(self) -> None:
        for run in (None, "b"):
            after_stop = None
            for kind, message in self.events:
                if kind == "stop_read":
                    after_stop = 0
                elif message.get("run") != run:
                    continue
                elif after_stop is not None and message["type"] == "step":
                    after_stop += 1
                    assert after_stop <= 1, f"run {run or 'a'}: more than one step left after the stop was read"
                elif message["type"] in ("done", "session"):
                    after_stop = None
        self.events.clear()


class PairObserver(Observer):
    """Run A's view (Observer's own checks) and run B's (`self.b`), each fed its own messages; statuses go to
    whichever run they still describe."""

    def __init__(self):
        self.b = Observer()
        super().__init__()

    def see(self, m: dict) -> None:
        kind = m["type"]
        if m.get("run") == "b" or kind in ("status", "compare"):
            self.received += 1
            counts["messages"] += 1
        if m.get("run") == "b":
            self.b.see(m)
            self.b.received -= 1  # counted once, above
        elif kind == "compare":
            compared["steps"] += 1
            assert m["step"] == self.last_step == self.b.last_step, (m["step"], self.last_step, self.b.last_step)
            assert m["parted"] == (m["token_a"]["id"] != m["token_b"]["id"])
        elif kind == "status":
            state = m.get("run_state", m["state"])
            for run in (self, self.b):
                if state == "finished" or not run.run_over:
                    run._see_status(m)
        else:
            if kind == "session":
                self.b.new_run()
            super().see(m)


class PairMachine(RunMachine):
    async def connect(self):
        comm = await super().connect()
        self.seen, received = PairObserver(), self.seen.received
        self.seen.received = received
        return comm

    @rule(paused=st.booleans(), tokens=st.integers(2, 10), seed=st.integers(0, 3), int8=st.booleans())
    def start(self, paused, tokens, seed, int8):
        compare = {"weights": "int8"} if int8 else {"params": {"temperature": 1.5}}
        answers = self.exchange({"type": "start", "messages": PROMPT, "paused": paused, "compare": compare,
                                 "params": {"seed": seed, "temperature": 0.9, "max_new_tokens": tokens}})
        sessions = [m.get("run") for m in answers if m["type"] == "session"]
        assert (sessions == [None, "b"] and not errors(answers)) or (not sessions and len(errors(answers)) == 1), answers
        self.watch()  # a running pair's first compared step (hypothesis draws starts often: each one steps)

    @rule()
    def watch(self):
        """Ack what came and read on, as the page does, until a running pair's next compare (or its done)."""
        seen = self.seen
        if not seen.live or seen.run_over or seen.paused or seen.held:
            return

        async def go():
            await self.comm.send_json_to({"type": "ack", "received": seen.received})
            while (await self.receive())["type"] not in ("compare", "done"):
                pass
        self.wait(go())
        self.log.check()

    @rule()
    def step(self):
        pair = [run for run in (self.seen, self.seen.b) if run.paused and run.live]
        for run in pair:
            run.asked += 1
        answers = self.exchange({"type": "step"})
        stepped = [m for m in answers if m["type"] == "step" and not m.get("forced")]
        if errors(answers):
            assert len(errors(answers)) == 1, answers
            for run in pair:
                run.asked = 0
        else:
            assert pair and len(stepped) == len(pair), answers

    @rule(with_step=st.booleans())
    def stop(self, with_step):
        message = {"type": "stop"}
        if with_step and self.seen.live:
            message["step"] = self.seen.stop_seen = self.seen.b.stop_seen = self.seen.last_step
        answers = self.exchange(message, until_done=True)
        done = [m for m in answers if m["type"] == "done" and m.get("run") is None]
        if errors(answers):
            assert len(errors(answers)) == 1 and all(d["stop_reason"] != "stopped" for d in done), answers
            self.seen.stop_seen = self.seen.b.stop_seen = None
        else:
            assert len(done) == 1 and done[0]["stop_reason"] in ("stopped", "eos", "max_new_tokens"), answers

    @rule(back=st.integers(0, 16), token=st.integers(3, 400))
    def fork(self, back, token):
        step = max(1, self.seen.last_step - back)
        self.seen.forks += 1
        self.seen.b.forks += 1
        answers = self.exchange({"type": "fork", "step": step, "token_id": token, "run": "both"})
        forked = [m for m in answers if m["type"] == "step" and m.get("forced")]
        if forked:
            assert [m.get("run") for m in forked] == [None, "b"] and not errors(answers), answers
            assert all(m["step"] == step for m in forked), answers
            compares = [m for m in answers if m["type"] == "compare"]  # the step in flight's may come first
            assert compares and compares[-1]["step"] == step and not compares[-1]["parted"], answers
        else:
            self.seen.forks -= 1
            self.seen.b.forks -= 1
            assert len(errors(answers)) == 1, answers


@pytest.fixture
def pair_log(stories_model, monkeypatch):
    """test_run_state_machine's settings, logging pairs; a pair sends 3 frames a step: a window of 24 holds it about
    as often as 8 hold a lone run."""
    return logged_machine_settings(stories_model, monkeypatch, PairLog(), 24)


@pytest.mark.slow
def test_the_pair_state_machine(pair_log):
    compared.update(steps=0)
    run_machine(PairMachine, pair_log, SEQUENCES)
    print(f"\npair state machine: {counts['sequences']} sequences, {counts['actions']} actions, "
          f"{counts['messages']} messages checked, {compared['steps']} compared steps")
    # Pairs that step, not only refusals (under load, short runs end before many compares: a quarter is the floor)
    assert counts["sequences"] >= SEQUENCES and compared["steps"] >= SEQUENCES // 4
