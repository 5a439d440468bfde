"""A message's canonical text: the one JSON text a recorded message is hashed as and sent as.

Sorted keys, no spaces, ASCII, integral floats as ints (as a browser writes a message back), strict JSON (a
ValueError on NaN or infinity). The web side hashes it (explainer/services/run/provenance.py, RunDigest); a step
is given it where it is built (builders.step_payload, on the device's thread), in one encoding.

Writing it costs: a 32-visitor SmolLM2 tick wrote ~1.8 MB of steps, most of it base64, which json.dumps scans
character by character for escapes. A packed array (Packed) needs none, so its text is written directly and put
in place after json.dumps has written the rest around a placeholder.
"""
from __future__ import annotations

import json
import re
import secrets

from .framing import Encoded
from .packing import Packed, PlainList

# A placeholder's string: NUL and a nonce no message text can know, then its number (json.dumps writes NUL \u0000)
_NONCE = secrets.token_hex(8)
_PLACEHOLDER = re.compile(r'"\\u0000' + _NONCE + r'(\d+)"')
_LEAVES = frozenset({str, int, bool, type(None), PlainList})  # as they are (PlainList: so already, by its builder)


class Canonical(Encoded):
    """A message with its canonical text, made where the message was made (a step: builders.step_payload; another
    of a decode tick: scheduler.encoded_tick); the socket sends that text and the recording's digest hashes it."""
    __slots__ = ()


def canonical_text(payload: dict) -> str:
    """The payload as the digest reads it (see the module's docstring)."""
    packed: list[str] = []
    text = json.dumps(_plain(payload, packed), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return _PLACEHOLDER.sub(lambda m: packed[int(m.group(1))], text) if packed else text


def with_first_member(text: str, key: str, value_text: str) -> str:
    """An object's canonical `text` with one more member, `key` (which sorts before every key it has) holding the
    canonical `value_text`: how a step adds its attention once the rest's size has decided it."""
    head = json.dumps(key) + ":" + value_text
    return "{" + head + ("}" if text == "{}" else "," + text[1:])


def _plain(value, packed: list[str]):
    """JSON as a browser re-encodes it: 2.0 reads back as 2, so integral floats become ints. Leaves are passed over
    without a call (a step has ~700 values: this walk was half of writing its canonical text). A Packed array
    becomes a placeholder for its own text (in `packed`)."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind in _LEAVES:
        return value
    if kind is Packed and (text := value.text()) is not None:
        packed.append(text)
        return f"\0{_NONCE}{len(packed) - 1}"
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAVES else _plain(v, packed) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _LEAVES else _plain(v, packed) for v in value]
    if isinstance(value, float) and value.is_integer():  # a float's subclass (numpy's)
        return int(value)
    return value
