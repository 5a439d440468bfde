"""Protocol fuzzing: over a thousand generated frames against one live socket (the tiny real model).

Each frame is followed by a sentinel (an unknown type naming its serial number), so the replies between
the two are the frame's. Every frame that is bad by construction must get exactly one `error` with a
documented code other than model_error; no frame may crash the consumer (a crash closes the
communicator and fails the next read); afterwards a normal run works on that socket and on a new one.
Frames come from the strategies in fuzz_frames.py with derandomize=True: every run sends the same ones.
"""
import asyncio
import json
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from explainer.asgi import application
from explainer.protocol import MEASURES
from explainer.services.device import model_registry
from explainer.services.admission.capacity import generating
from explainer.services.run.visitor_run import READER_PAUSED, live_sessions
from tests.explainer.fuzz_frames import (GOOD_START, MAX_NEW_TOKENS, NO_RUN_FRAMES, RAW_FRAMES, RUN_FRAMES, START_FRAMES,
                                         VALID_MESSAGES, Frame)
from tests.support import stories_spec

ORIGIN = [(b"origin", b"http://127.0.0.1")]
# The codes a refused frame may get (docs/protocol.md); never model_error or out_of_memory.
SPECIFIC_CODES = {"bad_json", "binary_frame", "frame_too_large", "unknown_type", "missing_field", "wrong_type",
                  "out_of_range", "invalid_value", "unknown_param", "invalid_prompt", "context_window",
                  "invalid_state", "finished", "not_kept", "no_run", "rate_limited"}
PROTOCOL_DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
FUZZ = hypothesis_settings(derandomize=True, database=None, deadline=None, print_blob=False,
                           suppress_health_check=list(HealthCheck))


# ---- the driver: one socket, a sentinel after every frame ---------------------------------------
class Driver:
    def __init__(self, comm: WebsocketCommunicator):
        self.comm, self.read, self.acked, self.frames, self.serial = comm, 0, 0, 0, 0
        self.streaming = False  # a run is stepping in the background (its messages may trail a reply)

    @classmethod
    async def open(cls) -> "Driver":
        comm = WebsocketCommunicator(application, "/ws/session/", headers=ORIGIN)
        connected, _ = await comm.connect()
        assert connected
        driver = cls(comm)
        assert (await driver.receive())["state"] == "ready"
        return driver

    async def receive(self) -> dict:
        """The next server message; acks every 8, as the page does, so the run's window never fills."""
        message = await self.comm.receive_json_from(timeout=60)
        self.read += 1
        if message.get("type") == "status":
            self.streaming = message["state"] == "running" or message == READER_PAUSED
        elif message.get("type") == "error" and message["code"] in ("model_error", "out_of_memory"):
            self.streaming = False
        if self.read - self.acked >= 8 or message == READER_PAUSED:
            self.acked = self.read
            await self.comm.send_json_to({"type": "ack", "received": self.read})
        return message

    async def send(self, frame: Frame) -> None:
        if frame.binary is not None:
            await self.comm.send_to(bytes_data=frame.binary)
        else:  # send_input, not send_to: send_to refuses the empty frame
            await self.comm.send_input({"type": "websocket.receive", "text": frame.text})

    async def exchange(self, frame: Frame) -> list[dict]:
        """Send the frame and a sentinel; the messages before the sentinel's error are the frame's replies."""
        self.serial += 1
        sentinel = f"sentinel-{self.serial}"
        await self.send(frame)
        self.frames += 1
        await self.comm.send_json_to({"type": sentinel})
        replies = []
        while True:
            message = await self.receive()
            if message.get("type") == "error" and repr(sentinel) in message["message"]:
                break
            replies.append(message)
        while self.streaming or measuring(frame, replies):  # a run the frame started or resumed, or a measurement
            replies.append(await self.receive())
        return replies

    async def check(self, frame: Frame) -> None:
        replies = await self.exchange(frame)
        errors = [m for m in replies if m.get("type") == "error"]
        shown = (frame.text or repr(frame.binary))[:300]
        for error in errors:
            assert error["code"] in SPECIFIC_CODES, (shown, error)
            assert isinstance(error["message"], str) and error["message"] and "field" in error, (shown, error)
        assert len(errors) <= 1, (shown, replies)
        if frame.expect == "silent":
            assert replies == [], (shown, replies)
        elif frame.expect == "error":
            assert len(errors) == 1, (shown, replies)
        elif frame.expect == "done":  # a valid start runs to the end
            assert not errors and [m["type"] for m in replies].count("done") == 1, (shown, replies)
        elif frame.expect != "any":
            assert [e["code"] for e in errors] == [frame.expect], (shown, replies)

    async def paused_run(self) -> None:
        """(Re)start a paused run with three steps taken, for the verbs to work on."""
        await self.comm.send_json_to({**GOOD_START, "paused": True, "params": {"seed": 5, "max_new_tokens": MAX_NEW_TOKENS}})
        while (message := await self.receive()).get("type") != "status" or message["state"] != "paused":
            assert message.get("type") != "error", message
        for _ in range(3):
            await self.comm.send_json_to({"type": "step"})
            while (message := await self.receive())["type"] == "check":  # the causal-mask check, once it is in
                pass
            assert message["type"] == "step", message

    async def normal_run(self, steps: int = 3) -> list[dict]:
        await self.comm.send_json_to({**GOOD_START, "params": {"seed": 9, "max_new_tokens": steps}})
        seen = [await self.receive()]
        while seen[-1].get("type") != "status" or seen[-1]["state"] != "finished":
            seen.append(await self.receive())
        return seen


def measuring(frame: Frame, replies: list[dict]) -> bool:
    """A valid `measure` frame whose answer (serving, busy or an error) is not in yet: a measurement runs as its own
    task (explainer/services/run/on_demand.py), so its answer may come after the sentinel's, before the next frame's."""
    try:
        message = json.loads(frame.text or "")
    except (ValueError, RecursionError):
        return False
    if not (isinstance(message, dict) and message.get("type") == "measure" and isinstance(message.get("what"), str)
            and message["what"] in MEASURES):
        return False
    return not any(m.get("type") in ("serving", "busy", "error") for m in replies)


@pytest.fixture
def fuzz_settings(settings):
    settings.EXPLAINER_MODEL = stories_spec()
    settings.EXPLAINER_MAX_SESSIONS = 2
    settings.EXPLAINER_MAX_NEW_TOKENS = MAX_NEW_TOKENS
    settings.EXPLAINER_RATE_PER_S = 0  # no rate limit: this socket floods on purpose
    model_registry.reset()
    yield settings
    model_registry.reset()


def test_every_code_is_documented():
    for code in SPECIFIC_CODES | {"model_error", "out_of_memory", "too_many_connections"}:
        assert f"`{code}`" in PROTOCOL_DOC, code


def test_a_thousand_hostile_frames_each_get_a_named_error(fuzz_settings):
    loop = asyncio.new_event_loop()
    try:
        driver = loop.run_until_complete(Driver.open())

        def phase(frames, examples: int, batch: int, before=None):
            @hypothesis_settings(FUZZ, max_examples=examples)
            @given(st.lists(frames, min_size=batch, max_size=batch))
            def run(batch_of_frames):
                async def go():
                    if before:
                        await before()
                    for frame in batch_of_frames:
                        await driver.check(frame)
                loop.run_until_complete(go())
            run()

        phase(RAW_FRAMES, examples=40, batch=10)
        phase(NO_RUN_FRAMES, examples=30, batch=10)
        phase(START_FRAMES, examples=25, batch=8)
        phase(RUN_FRAMES, examples=25, batch=8, before=driver.paused_run)
        assert driver.frames >= 1000

        seen = loop.run_until_complete(driver.normal_run())
        assert [m["type"] for m in seen].count("step") == 3 and not any(m["type"] == "error" for m in seen)
        fresh = loop.run_until_complete(Driver.open())
        seen = loop.run_until_complete(fresh.normal_run())
        assert [m["type"] for m in seen].count("step") == 3 and not any(m["type"] == "error" for m in seen)
        for d in (driver, fresh):
            loop.run_until_complete(d.comm.disconnect())
        assert generating.active == 0 and live_sessions() == 0
    finally:
        loop.close()


# ---- what the fuzzer found, pinned --------------------------------------------------------------
_RUN = {"type": "start", "messages": VALID_MESSAGES}


@pytest.mark.parametrize("frame,expect,field", [
    ({**_RUN, "text": None}, "done", None),  # a null counts as absent: this is a messages start
    ({"type": "start", "messages": None}, "missing_field", "messages"),
    ({"type": "start", "text": "\ud800"}, "invalid_value", "text"),  # the tokenizer cannot encode a lone surrogate
    ({"type": "start", "messages": [{"role": "user", "content": "a\udfffb"}]}, "invalid_value", "messages[0]"),
    ({**_RUN, "params": {"stop": ["\ud800"]}}, "invalid_value", "stop"),
    ({**_RUN, "params": {"temperature": 6.7e-46}}, "out_of_range", "temperature"),  # 0 in float32: logits / 0
    ({**_RUN, "params": {"temperature": 2, "repetition_penalty": 3, "max_new_tokens": 2}}, "done", None),  # ints, not floats
    ({**_RUN, "params": {"temperature": 10**400}}, "out_of_range", "temperature"),  # too big for a float
    ({**_RUN, "params": {"seed": 1}}, "done", None),  # no max_new_tokens: the default is capped, not refused
    ({"type": "ack", "received": [[[[[[[1]]]]]]]}, "wrong_type", "received"),  # 8 deep: allowed, then validated
    ({"type": "ack", "received": [[[[[[[[1]]]]]]]]}, "bad_json", None),  # 9 deep: refused whole
    ({"type": "ack", "received": 5}, "silent", None),  # ack is a verb of the run (it had none: model_error)
])
async def test_what_the_fuzzer_found(fuzz_settings, frame, expect, field):
    driver = await Driver.open()
    replies = await driver.exchange(Frame(text=json.dumps(frame)))
    if expect == "done":
        assert [m["type"] for m in replies].count("done") == 1 and not any(m["type"] == "error" for m in replies), replies
    elif expect == "silent":
        assert replies == []
    else:
        assert [(m["code"], m["field"]) for m in replies] == [(expect, field)], replies
    await driver.comm.disconnect()


async def test_pause_and_resume_after_the_end_are_refused(fuzz_settings):
    """A resume after `done` used to say `running` with nothing running: a client waiting for the end hung."""
    driver = await Driver.open()
    await driver.normal_run()
    for verb in ("resume", "pause"):
        replies = await driver.exchange(Frame(text=json.dumps({"type": verb})))
        assert [m.get("code") for m in replies] == ["finished"], replies
    await driver.comm.disconnect()
