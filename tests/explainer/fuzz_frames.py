"""Hypothesis strategies for hostile client frames (tests/explainer/test_fuzz.py), each with what it must get.

A Frame's `expect` is an error code, "error" (one error, any specific code), "silent" (no reply),
"done" (a valid start: a whole run) or "any" (a reply or a specific error, never model_error).
"""
import json
from dataclasses import dataclass

from hypothesis import strategies as st

from explainer.protocol import CLIENT_TYPES, DETAIL_WHATS, MAX_DEPTH, MEASURES, nesting_depth
from explainer.services.run.visitor_run import MAX_ACK
from inference.sampling import MAX_SEED, MIN_REPETITION_PENALTY, MIN_TEMPERATURE

MAX_NEW_TOKENS = 8  # the server's cap in the fuzz test: a valid start the fuzzer stumbles on finishes quickly
FRAME_BYTES = 64 * 1024
VALID_MESSAGES = [{"role": "user", "content": "<t403> <t407>"}]
GOOD_START = {"type": "start", "messages": VALID_MESSAGES, "params": {"seed": 3, "max_new_tokens": 4}}
ROLES = ("user", "system", "assistant")
EXPENSIVE_MEASURES = ("batch", "quantize", "speculative", "prefix", "languages_prefill")  # long experiments: valid, but not what is fuzzed here
CHEAP_MEASURES = tuple(m for m in MEASURES if m not in EXPENSIVE_MEASURES)


@dataclass
class Frame:
    text: str | None = None
    binary: bytes | None = None
    expect: str = "any"


# ---- values ------------------------------------------------------------------------------------------
# Text with every kind of code point, lone surrogates included (the communicator carries them as they
# are; over a real socket they arrive as \ud800-style JSON escapes, which decode to the same strings).
UNICODE = st.text(st.characters(categories=("L", "M", "N", "P", "S", "Z", "C")), max_size=40)
# Text a valid frame may carry: everything but surrogate code points (those must be refused).
VALID_TEXT = st.text(st.characters(categories=("L", "M", "N", "P", "S", "Z", "Cc", "Cf", "Co")), max_size=40)
SURROGATE_TEXT = st.builds(lambda a, s, b: a + s + b, UNICODE, st.sampled_from(["\ud800", "\udfff", "\udc80\ud83d"]), UNICODE)
HUGE_INTS = st.sampled_from([2**31, 2**53 + 1, 2**63, 2**64, 10**30, 10**400, -(2**63), -1, -(10**30), -(10**400)])
NUMBERS = st.one_of(st.integers(), HUGE_INTS, st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1e308, -1e308, 5e-324, -0.0]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, UNICODE, SURROGATE_TEXT)
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(UNICODE, inner, max_size=4),
                           max_leaves=10)
FIELD_NAMES = st.sampled_from(["step", "layer", "head", "position", "token_id", "what", "received", "on",
                               "temperature", "top_k", "top_p", "min_p", "memory_bytes", "context_tokens", "paused"])


def frame_of(value, ascii_only=True, expect="any") -> Frame:
    """The value as a text frame; nested past MAX_DEPTH it is refused whole, whatever else is wrong."""
    return Frame(text=json.dumps(value, ensure_ascii=ascii_only), expect="bad_json" if nesting_depth(value) > MAX_DEPTH else expect)


def frames(messages, expect) -> st.SearchStrategy:
    """Each message as a frame, escaped to ASCII or not; `expect` may be a function of the message."""
    return st.builds(lambda m, a: frame_of(m, a, expect(m) if callable(expect) else expect), messages, st.booleans())


# ---- raw frames: the transport and the JSON layer ------------------------------------------------------
def _not_an_object(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), dict)
    except ValueError:
        return True


def _nested(depth: int, kind: str) -> str:
    opener, closer = ("[", "]") if kind == "list" else ('{"a":', "}")
    return opener * depth + "1" + closer * depth


def _oversized(n: int, ch: str) -> Frame:
    return Frame(text=json.dumps({"type": "start", "text": ch * n}, ensure_ascii=False), expect="frame_too_large")


_CONSTANT_TEMPLATES = ['{{"type": "start", "text": "hi", "params": {{"temperature": {c}}}}}',
                       '{{"type": "retemper", "step": 1, "top_p": {c}}}', '{{"type": "ack", "received": {c}}}',
                       '{{"type": {c}}}', "[{c}]", "{c}"]
RAW_FRAMES = st.one_of(
    st.binary(min_size=1, max_size=200).map(lambda b: Frame(binary=b, expect="binary_frame")),
    st.just(Frame(text="", expect="bad_json")),
    st.text(max_size=60).filter(_not_an_object).map(lambda t: Frame(text=t, expect="bad_json")),
    JSON_VALUES.filter(lambda v: not isinstance(v, dict)).map(lambda v: frame_of(v, expect="bad_json")),
    st.builds(lambda t, c: Frame(text=t.format(c=c), expect="bad_json"), st.sampled_from(_CONSTANT_TEMPLATES),
              st.sampled_from(["NaN", "Infinity", "-Infinity"])),
    st.builds(lambda d, k: Frame(text=_nested(d, k), expect="bad_json"),
              st.integers(MAX_DEPTH + 1, 2_000) | st.integers(2_000, 12_000), st.sampled_from(["list", "dict"])),
    st.integers(4_400, 6_000).map(lambda n: Frame(text='{"type": "ack", "received": ' + "9" * n + "}", expect="bad_json")),
    st.builds(_oversized, st.integers(FRAME_BYTES // 3 + 10, FRAME_BYTES + 2_000),
              st.sampled_from(["x", "é", "€", "🙂", "\ud800"]))
    .filter(lambda f: len(f.text.encode("utf-8", "surrogatepass")) > FRAME_BYTES),
    frames(st.dictionaries(UNICODE.filter(lambda k: k != "type"), JSON_VALUES, max_size=3), "missing_field"),
    frames(JSON_VALUES.filter(lambda v: not isinstance(v, str) and v is not None).map(lambda v: {"type": v}), "missing_field"),
    frames(st.one_of(UNICODE, SURROGATE_TEXT).filter(lambda t: t not in CLIENT_TYPES).map(lambda t: {"type": t}), "unknown_type"),
)


# ---- verbs without a run ---------------------------------------------------------------------------------
def ack_is_valid(message: dict) -> bool:
    received = message.get("received")
    return isinstance(received, int) and not isinstance(received, bool) and 0 <= received <= MAX_ACK


def _without_a_run(message: dict) -> str:
    kind = message["type"]
    if kind == "ack":
        return "silent" if ack_is_valid(message) else "error"
    if kind == "measure":
        return "any" if message.get("what") in MEASURES else "error"
    return "any" if kind in ("follow", "tokenize", "answer") else "no_run"  # workshop verbs and counts need no run


_WHAT = st.one_of(st.sampled_from(CHEAP_MEASURES + DETAIL_WHATS), UNICODE, JSON_VALUES)
VERB_MESSAGES = st.builds(
    lambda kind, fields, extra: {**extra, **fields, "type": kind},
    st.sampled_from([t for t in CLIENT_TYPES if t != "start"]),
    st.dictionaries(FIELD_NAMES, st.one_of(JSON_VALUES, st.integers(-3, 40), HUGE_INTS), max_size=4),
    st.fixed_dictionaries({}, optional={"what": _WHAT, "received": st.one_of(st.integers(-5, 10**6), HUGE_INTS, JSON_VALUES)}),
).filter(lambda m: m.get("what") not in EXPENSIVE_MEASURES)
NO_RUN_FRAMES = frames(VERB_MESSAGES, _without_a_run)


# ---- starts: broken on purpose, anything at all, and valid ----------------------------------------------
_RANGES = {"temperature": (0, 2), "top_p": (0, 1), "min_p": (0, 1), "repetition_penalty": (MIN_REPETITION_PENALTY, 10),
           "presence_penalty": (-2, 2), "frequency_penalty": (-2, 2), "top_k": (0, None),
           "max_new_tokens": (1, MAX_NEW_TOKENS), "seed": (0, MAX_SEED)}
_INTEGER_PARAMS = ("top_k", "max_new_tokens", "seed")
_FINITE = {"allow_nan": False, "allow_infinity": False}


def _outside(name: str) -> st.SearchStrategy:
    """Values the parameter must refuse: out of its range, or not a number of its kind."""
    low, high = _RANGES[name]
    if name in _INTEGER_PARAMS:
        below = st.integers(max_value=low - 1) | st.floats(**_FINITE) | HUGE_INTS.filter(lambda n: n < low)
        above = st.nothing() if high is None else st.integers(min_value=high + 1) | HUGE_INTS.filter(lambda n: n > high)
    else:
        below = st.floats(max_value=low, exclude_max=name != "top_p", **_FINITE)
        above = st.integers(min_value=high + 1) | HUGE_INTS.filter(lambda n: n > high)
        above = above | st.floats(min_value=high, exclude_min=True, **_FINITE)
    wrong = st.one_of(st.none(), st.booleans(), UNICODE, st.lists(SCALARS, max_size=3), st.dictionaries(UNICODE, SCALARS, max_size=2))
    if name == "temperature":  # 0 is greedy; just above 0, float32 logits / T overflow
        wrong = wrong | st.floats(0, MIN_TEMPERATURE, exclude_min=True, exclude_max=True)
    return below | above | wrong


_BAD_STOPS = st.one_of(st.lists(st.text(min_size=1, max_size=5), min_size=5, max_size=8), st.just([""]), st.just(["x" * 65]),
                       st.lists(SURROGATE_TEXT.filter(lambda s: 1 <= len(s) <= 64), min_size=1, max_size=2),
                       st.lists(JSON_VALUES.filter(lambda v: not isinstance(v, str)), min_size=1, max_size=3))
BAD_PARAMS = st.one_of(
    *[_outside(name).map(lambda v, n=name: {n: v}) for name in _RANGES],
    st.dictionaries(UNICODE.filter(lambda k: k not in _RANGES and k != "stop"), SCALARS, min_size=1, max_size=2),
    _BAD_STOPS.map(lambda s: {"stop": s}),
)
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(ROLES), "content": VALID_TEXT})
_BAD_MESSAGE_LISTS = st.one_of(
    JSON_VALUES.filter(lambda v: not isinstance(v, list)), st.just([]),
    st.lists(_MESSAGE, min_size=65, max_size=66),
    st.lists(JSON_VALUES.filter(lambda v: not isinstance(v, dict)), min_size=1, max_size=3),
    st.builds(lambda r, c: [{"role": r, "content": c}], st.one_of(UNICODE, JSON_VALUES).filter(lambda r: r not in ROLES), UNICODE),
    st.builds(lambda c: [{"role": "user", "content": c}], JSON_VALUES.filter(lambda c: not isinstance(c, str))),
    st.builds(lambda c: [{"role": "user", "content": c}], SURROGATE_TEXT),
)
BROKEN_STARTS = st.one_of(
    st.just({"type": "start"}), st.just({"type": "start", "messages": None}), st.just({"type": "start", "text": None}),
    st.just({**GOOD_START, "text": "both"}),
    _BAD_MESSAGE_LISTS.map(lambda m: {**GOOD_START, "messages": m}),
    st.one_of(JSON_VALUES.filter(lambda t: not isinstance(t, str)), st.just(""), SURROGATE_TEXT).map(
        lambda t: {"type": "start", "text": t, "params": {"max_new_tokens": 2}}),
    JSON_VALUES.filter(lambda p: not isinstance(p, dict) and p is not None).map(lambda p: {**GOOD_START, "params": p}),
    JSON_VALUES.filter(lambda p: not isinstance(p, bool)).map(lambda p: {**GOOD_START, "paused": p}),
    BAD_PARAMS.map(lambda p: {**GOOD_START, "params": {**GOOD_START["params"], **p}}),
)
ANY_STARTS = st.builds(
    lambda fields, params: {"type": "start", **fields, **({"params": params} if params is not None else {})},
    st.fixed_dictionaries({}, optional={"messages": st.one_of(st.just(VALID_MESSAGES), JSON_VALUES),
                                        "text": st.one_of(UNICODE, JSON_VALUES), "paused": st.one_of(st.just(True), JSON_VALUES)}),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(sorted(_RANGES) + ["stop", "bogus"]), SCALARS, max_size=4)),
)
IN_RANGE = {  # ints where floats are expected too: JSON's 2 is an int
    "temperature": st.integers(0, 2) | st.floats(MIN_TEMPERATURE, 2), "top_p": st.floats(0, 1, exclude_min=True),
    "min_p": st.integers(0, 1) | st.floats(0, 1), "repetition_penalty": st.integers(1, 10) | st.floats(MIN_REPETITION_PENALTY, 10),
    "presence_penalty": st.integers(-2, 2) | st.floats(-2, 2), "frequency_penalty": st.integers(-2, 2) | st.floats(-2, 2),
    "top_k": st.integers(0, 10**6), "max_new_tokens": st.integers(1, 3), "seed": st.integers(0, MAX_SEED),
    "stop": st.lists(VALID_TEXT.filter(lambda t: 1 <= len(t) <= 64), max_size=4),
}
VALID_STARTS = st.builds(lambda messages, params: {"type": "start", "messages": messages, "params": {"max_new_tokens": 2, **params}},
                         st.lists(_MESSAGE, min_size=1, max_size=3), st.fixed_dictionaries({}, optional=IN_RANGE))
START_FRAMES = st.one_of(frames(BROKEN_STARTS, "error"), frames(ANY_STARTS, "any"), frames(VALID_STARTS, "done"))


# ---- verbs against a paused run with three steps ---------------------------------------------------------
_INDEX = st.one_of(st.integers(0, 5), st.integers(-2, 12), HUGE_INTS, JSON_VALUES)
_POSITIONS = ("step", "layer", "head", "position")
RUN_VERBS = st.one_of(
    st.fixed_dictionaries({"type": st.just("detail"), "what": st.sampled_from(DETAIL_WHATS) | _WHAT},
                          optional={k: _INDEX for k in _POSITIONS}),
    st.fixed_dictionaries({"type": st.just("retemper"), "step": _INDEX}, optional={
        "temperature": st.one_of(NUMBERS, JSON_VALUES), "top_k": _INDEX, "top_p": NUMBERS, "min_p": NUMBERS}),
    st.fixed_dictionaries({"type": st.just("fork"), "step": _INDEX,
                           "token_id": st.one_of(st.integers(-2, 600), HUGE_INTS, JSON_VALUES)}),
    st.fixed_dictionaries({"type": st.sampled_from(["step", "pause", "resume", "stop"])}),
    VERB_MESSAGES,
    # Plausible ones, most of them valid: the replies must come, and never as model_error.
    st.fixed_dictionaries({"type": st.just("detail"), "what": st.sampled_from(DETAIL_WHATS), "step": st.integers(0, 4),
                           "layer": st.integers(0, 5), "head": st.integers(0, 8), "position": st.integers(0, 12)}),
    st.fixed_dictionaries({"type": st.just("retemper"), "step": st.integers(1, 3)}, optional={
        "temperature": IN_RANGE["temperature"], "top_k": st.integers(0, 600),
        "top_p": IN_RANGE["top_p"], "min_p": IN_RANGE["min_p"]}),
    st.fixed_dictionaries({"type": st.just("fork"), "step": st.integers(1, 3), "token_id": st.integers(0, 600)}),
).filter(lambda m: m.get("what") not in EXPENSIVE_MEASURES)
RUN_FRAMES = frames(RUN_VERBS, lambda m: "silent" if m["type"] == "ack" and ack_is_valid(m) else "any")
