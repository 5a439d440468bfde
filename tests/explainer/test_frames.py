"""No message is too large to send: every prompt length up to the cap starts and finishes under the real
Daphne flags, on `bundled` and on a model with SmolLM2-135M's shapes (docs/protocol.md, "Messages larger
than the send cap"). The sweep is an endurance test (marked slow): every 7th length under CI=true, the
lengths where the prefill's frame count changes otherwise."""
import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer
from websockets.asyncio.client import connect as ws_connect

from inference.wire.framing import encoded_size, join_message, split_message
from inference.loading import load_model, resolve_spec
from inference.wire.packing import unpack
from inference.wire.schema import validate_payload
from inference.prompting import build_prompt
from tests.conftest import full_range
from tests.explainer.live_server import daphne_flag, start_daphne
from tests.smollm2_shaped import save_smollm2_shaped

JS = Path(__file__).resolve().parents[2] / "static" / "js"
PROMPT_CAP = 384
PREFILL_BUDGET = 96 * 1024  # issue 12: each prefill message on SmolLM2 with a 384-token prompt
DECODE_BUDGET = 64_000  # and each decode message
SEND_CAP = 64_000  # EXPLAINER_MAX_SEND_BYTES's default
# Words the bundled tokenizer reads as one token each, with or without a leading space.
WORDS = "the of a to and in is it for on as by at be an are or not one all water light".split()


def lengths() -> list[int]:
    return sorted({*range(1, PROMPT_CAP + 1, 7), PROMPT_CAP})


def prompt_text(tokens: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(tokens))


# ---- the splitter -------------------------------------------------------------------------------------
def test_the_send_cap_is_the_default_and_under_daphnes(settings):
    assert settings.EXPLAINER_MAX_SEND_BYTES == SEND_CAP < int(daphne_flag("--websocket-max-message-size"))


def test_a_message_that_fits_goes_out_as_it_is():
    message = {"type": "step", "text": "x" * 100}
    assert split_message(message, 1000) == [message]


def test_a_message_is_encoded_once_for_its_size_and_its_frame():
    from explainer.protocol import encode_frame
    message = {"type": "step", "text": "caf\u00e9 <b>", "values": [0.5, 1.25]}
    [frame] = split_message(message, 1000)
    assert frame == message and frame.text == json.dumps(message) and encoded_size(frame) == len(json.dumps(message))
    assert encode_frame(frame) is frame.text  # the socket sends the text the size was read from
    [bad] = split_message({"type": "step", "forward_ms": float("nan")}, 1000)  # not strict JSON: no text kept
    assert not hasattr(bad, "text") and json.loads(encode_frame(bad))["code"] == "non_finite"


def test_strings_with_escapes_and_lists_are_cut_by_encoded_size_and_join_back():
    message = {"type": "prefill", "template": {"text": "é\"\\ ☃ 𝄞 " * 4000}, "tokens": [{"id": i, "text": "ü" * (i % 7)} for i in range(3000)],
               "attention": {"blocks": {"dtype": "float16", "shape": [5], "b64": "QUJD" * 30000}}, "small": [1, 2]}
    frames = split_message(message, 8000)
    assert len(frames) > 10 and frames[0]["parts"] == len(frames) - 1
    assert all(encoded_size(f) <= 8000 for f in frames)
    assert [f["index"] for f in frames[1:]] == list(range(1, len(frames)))
    assert join_message(frames) == message


def test_the_client_and_replay_join_what_the_server_split(tmp_path, bundled_prefill):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed to run the client's reassembly (apt install nodejs)")
    for name in ("client.js", "replay.js", "run-view.js", "lib/i18n.js"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(JS / name, tmp_path / name)
    (tmp_path / "package.json").write_text('{"type": "module"}')
    frames = split_message(bundled_prefill, 20_000)
    assert len(frames) > 2
    stream = [{"type": "session"}, *frames, {"type": "step", "step": 1}]
    (tmp_path / "frames.json").write_text(json.dumps(stream))
    (tmp_path / "drive.mjs").write_text(NODE_DRIVER)
    out = subprocess.run([node, str(tmp_path / "drive.mjs")], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    whole = json.loads(json.dumps(bundled_prefill))
    assert result["live_types"] == ["session", "prefill", "step"]
    assert result["live_prefill"] == whole and result["replayed_prefill"] == whole


NODE_DRIVER = """
import fs from "fs";
class FakeSocket extends EventTarget {
  static OPEN = 1;
  constructor() { super(); this.readyState = 0; FakeSocket.last = this; }
  send() {}
  close() {}
  open() { this.readyState = 1; this.dispatchEvent(new Event("open")); }
  deliver(text) { const e = new Event("message"); e.data = text; this.dispatchEvent(e); }
}
globalThis.WebSocket = FakeSocket;
globalThis.setTimeout = () => 0;
globalThis.clearTimeout = () => {};
const { SessionClient } = await import("./client.js");
const { Replay } = await import("./replay.js");
const stream = JSON.parse(fs.readFileSync("frames.json"));
const client = new SessionClient("ws://test/");
const seen = [];
client.addEventListener("message", (e) => seen.push(e.detail));
client.connect();
FakeSocket.last.open();
for (const frame of stream) FakeSocket.last.deliver(JSON.stringify(frame));
const replayed = new Replay(stream).stateAt(0).prefill;
console.log(JSON.stringify({ live_types: seen.map((m) => m.type), live_prefill: seen.find((m) => m.type === "prefill"),
                             replayed_prefill: replayed }));
"""


@pytest.fixture(scope="module")
def bundled_prefill():
    from inference.engine import GenerationSession
    from inference.sampling import SamplingParams
    loaded = load_model("bundled")
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, text=prompt_text(200)),
                                SamplingParams.from_dict({"max_new_tokens": 1, "temperature": 0}))
    return session.prefill()


# ---- every prompt length on the real Daphne -------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2_shaped(tmp_path_factory) -> Path:
    """SmolLM2-135M's shapes, but an MLP 64 wide: the MLP's width is in no payload, and 56 runs on 2 cores add up."""
    return save_smollm2_shaped(tmp_path_factory.mktemp("smollm2-shaped"), intermediate_size=64)


def test_smollm2_frames_at_the_prompt_cap_and_at_the_longest_context(tmp_path):
    """Exact SmolLM2-135M shapes: a 384-token prefill, and a decode step reading 384 + 256 keys (the longest run)."""
    from inference.engine import GenerationSession
    from inference.sampling import SamplingParams
    loaded = load_model(str(save_smollm2_shaped(tmp_path / "smollm2")), device="cpu")
    sizes = {}
    for tokens, kind in ((PROMPT_CAP, "prefill"), (PROMPT_CAP + 256 - 2, "step")):
        session = GenerationSession(loaded, build_prompt(loaded.tokenizer, text=prompt_text(tokens)),
                                    SamplingParams.from_dict({"max_new_tokens": 2, "temperature": 0}))
        payload = session.prefill() if kind == "prefill" else [session.prefill(), session.step(), session.step()][-1]
        frames = split_message(payload, SEND_CAP)
        assert join_message(frames) == json.loads(json.dumps(payload))
        sizes[kind] = [encoded_size(f) for f in frames]
        keys = payload["attention"].get("keys")
    assert keys == PROMPT_CAP + 255  # what the last step of a 384-token prompt and 256 new tokens reads
    print(f"\nSmolLM2-135M shapes, frames in bytes: 384-token prefill {sizes['prefill']}; step over "
          f"{keys} keys {sizes['step']}")
    assert len(sizes["prefill"]) > 1 and max(sizes["prefill"]) <= PREFILL_BUDGET
    assert max(sizes["step"]) <= DECODE_BUDGET


@pytest.mark.slow
@pytest.mark.parametrize("model", ["bundled", "smollm2_shaped"])
async def test_every_prompt_length_starts_and_finishes_under_daphnes_cap(model, request, tmp_path):
    """Every 7th prompt length and the cap under CI=true (full_range()); else the lengths where the prefill's
    frame count changes, found by bisection on this server's own runs, with 1, 2, the cap - 1 and the cap."""
    spec = "bundled" if model == "bundled" else str(request.getfixturevalue("smollm2_shaped"))
    tokenizer = AutoTokenizer.from_pretrained(resolve_spec(spec)[1])
    cap = int(daphne_flag("--websocket-max-message-size"))
    # A probe is a start and an ack; the bundled model answers 2 tokens in a few ms, so the probes outrun the
    # per-socket rate limit (20 a second: test_limits.py tests it) and a start would be refused as rate_limited: off.
    limits = {"EXPLAINER_MAX_PROMPT_TOKENS": str(PROMPT_CAP), "EXPLAINER_RATE_PER_S": "0"}
    server = await asyncio.to_thread(start_daphne, tmp_path, spec, limits)
    largest = {"prefill": 0, "step": 0, "detail": 0}
    prefill_frames: dict[int, int] = {}  # prompt tokens -> frames of its prefill message
    started = time.perf_counter()
    try:
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None, max_size=cap) as ws:
            assert json.loads(await ws.recv())["state"] == "ready"
            received = 1

            async def probe(tokens: int) -> int:
                """One run at `tokens` prompt tokens, checked; how many frames its prefill took."""
                nonlocal received
                text = prompt_text(tokens)
                assert len(build_prompt(tokenizer, text=text).ids) == tokens
                await ws.send(json.dumps({"type": "start", "text": text, "params": {"max_new_tokens": 2, "temperature": 0}}))
                frames, run = await _read_run(ws)
                received += len(frames)
                await ws.send(json.dumps({"type": "ack", "received": received}))
                for kind in ("prefill", "step"):
                    largest[kind] = max([largest[kind], *(len(f) for f, k in frames if k == kind)])
                assert run["prefill"] is not None, f"{tokens} tokens: {run['error']}"
                validate_payload(run["prefill"])
                assert len(run["prefill"]["tokens"]) == tokens
                assert [s["step"] for s in run["steps"]] == [1, 2] and run["done"]["steps"] == 2, f"{tokens} tokens"
                prefill_frames[tokens] = sum(k == "prefill" for _, k in frames)
                return prefill_frames[tokens]

            async def boundaries(low: int, high: int) -> None:
                """Probe between two probed lengths until each change of frame count is between neighbours."""
                if high - low > 1 and prefill_frames[low] != prefill_frames[high]:
                    middle = (low + high) // 2
                    await probe(middle)
                    await boundaries(low, middle)
                    await boundaries(middle, high)

            if full_range():
                for tokens in lengths():
                    await probe(tokens)
            else:
                for tokens in (1, 2, PROMPT_CAP - 1):
                    await probe(tokens)
                await boundaries(2, PROMPT_CAP - 1)
                await probe(PROMPT_CAP)  # last: the detail below reads this run
            await ws.send(json.dumps({"type": "detail", "what": "attention", "step": 0, "layer": 0, "head": 0}))
            frames, run = await _read_run(ws, until="detail")
            largest["detail"] = max(len(f) for f, _ in frames)
            assert unpack(run["detail"]["data"]).shape == (PROMPT_CAP, PROMPT_CAP)  # "Full matrix" at the cap
    finally:
        await asyncio.to_thread(server.stop)
    changes = [t for t in sorted(prefill_frames)[1:] if prefill_frames[t] != prefill_frames.get(t - 1, prefill_frames[t])]
    print(f"\n{model}: largest frames at up to {PROMPT_CAP} prompt tokens (bytes): {largest}; "
          f"{len(prefill_frames)} runs in {time.perf_counter() - started:.1f} s; prefill frames "
          f"{dict(sorted(prefill_frames.items()))}; frame count changes at {changes}")
    assert largest["prefill"] <= min(PREFILL_BUDGET, SEND_CAP) and largest["step"] <= DECODE_BUDGET
    assert largest["detail"] <= SEND_CAP


async def _read_run(ws, until: str = "finished") -> tuple[list[tuple[bytes, str]], dict]:
    """Read frames until the run finishes (or a `detail` arrives whole); join split messages like the client."""
    frames, run, pending = [], {"prefill": None, "steps": [], "done": None, "detail": None, "error": None}, []
    while True:
        text = await asyncio.wait_for(ws.recv(), timeout=120)
        message = json.loads(text)
        if message["type"] == "part" or message.get("parts"):
            pending.append(message)
            kind = pending[0]["type"]
            frames.append((text.encode(), kind))
            if len(pending) - 1 < pending[0]["parts"]:
                continue
            message, pending = join_message(pending), []
        else:
            frames.append((text.encode(), message["type"]))
        kind = message["type"]
        if kind == "prefill" or kind == "done" or kind == "detail" or kind == "error":
            run[kind] = message
        elif kind == "step":
            run["steps"].append(message)
        if kind == "error" or (kind == "status" and message["state"] == "finished") or kind == until:
            return frames, run
