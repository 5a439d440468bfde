"""Validation of client frames (docs/protocol.md): each bad frame becomes a named error, nothing raises."""
from __future__ import annotations

import json
import math

from django.utils.functional import cached_property

from explainer.messages import error_payload
from explainer.words import in_language, scope_language
from inference.wire.framing import strict_text

CLIENT_TYPES = ("start", "pause", "resume", "step", "stop", "fork", "detail", "retemper", "measure", "ack", "follow",
                "tokenize", "answer")
MEASURES = ("prefill_decode", "kv", "capacity", "batch", "speculative", "quantize", "prefix", "languages", "languages_prefill")
DETAIL_WHATS = ("attention", "hidden", "embedding", "lens")
MAX_DEPTH = 8  # client messages nest 4 deep (start > messages > [] > {}); deeper frames are refused whole


class ProtocolError(ValueError):
    """A client frame the server refuses; becomes {type: "error", code, message, field}."""

    def __init__(self, code: str, message: str, field: str | None = None):
        super().__init__(message)
        self.code, self.message, self.field = code, message, field

    def as_message(self) -> dict:
        return error_payload(self.code, self.message, self.field)


class TooDeep(ProtocolError):
    """JSON nested past the parser's recursion limit (still `bad_json` on the socket)."""


def encode_frame(message: dict) -> str:
    """Strict JSON out (inference/wire/framing.strict_text): a non-finite number becomes a `non_finite` error,
    never a frame with a bare NaN that a browser's JSON.parse refuses."""
    try:
        return strict_text(message)
    except ValueError:
        kind = message.get("type") if isinstance(message, dict) else None
        return json.dumps(ProtocolError("non_finite", f"the server computed a number that is not finite (NaN or "
                                        f"infinity) in a {kind!s:.40} message; it was not sent", "type").as_message())


class ReleasedOnExit:
    """Mixin for Channels' consumers: `disconnect` runs once whatever ends the socket. Channels dispatches one
    message at a time, so a disconnect that arrives while `receive` is inside a long prefill is never
    dispatched, and Daphne cancels the instance after --application-close-timeout; `asyncio.CancelledError`
    is a BaseException, so only a `finally` here gives back the slot, the address's counts and the cache."""

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.disconnect(None)

    def first_disconnect(self) -> bool:
        """True the first time only: `disconnect` may be called by Channels, by a failed connect and here."""
        first = not getattr(self, "_released", False)
        self._released = True
        return first


class StrictJson:
    """Mixin for Channels' JSON consumers: every frame they send is in the socket's language (explainer/words.py:
    `?lang=` on its URL, else Accept-Language) and encoded by encode_frame."""

    @cached_property
    def language(self) -> str:
        return scope_language(self.scope)

    async def encode_json(self, content):
        return encode_frame(in_language(content, self.language))


def parse_frame(text: str | None, binary: bytes | None, max_bytes: int, types: tuple[str, ...] = CLIENT_TYPES) -> dict:
    """Decode one WebSocket frame into a client message whose type is one of `types`."""
    if binary is not None:
        raise ProtocolError("binary_frame", "send JSON text frames, not binary")
    if text is None or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ProtocolError("frame_too_large", f"frames are limited to {max_bytes} bytes")
    message = json_object(text)
    if nesting_depth(message) > MAX_DEPTH:
        raise ProtocolError("bad_json", f"objects and arrays may nest at most {MAX_DEPTH} deep")
    kind = message.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("missing_field", "every frame needs a string type", "type")
    if kind not in types:
        raise ProtocolError("unknown_type", f"unknown type {kind[:40]!r}; one of {', '.join(types)}", "type")
    return message


def json_object(text: str | bytes) -> dict:
    """Strict JSON (no NaN/Infinity) that must be an object; anything else is a `bad_json` error."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise TooDeep("bad_json", "not valid JSON: objects and arrays nest too deep to read") from None
    except ValueError as exc:
        raise ProtocolError("bad_json", f"not valid JSON: {exc}"[:200]) from None
    if not isinstance(value, dict):
        raise ProtocolError("bad_json", "expected a JSON object")
    return value


def nesting_depth(value, limit: int = MAX_DEPTH) -> int:
    """How deep objects and arrays nest (1 for a flat object), without recursion; counting stops past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                break
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def integer(message: dict, name: str, low: int, high: int | None = None, required: bool = True) -> int | None:
    value = message.get(name)
    if value is None:
        if required:
            raise ProtocolError("missing_field", f"{name} is required", name)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError("wrong_type", f"{name} must be an integer", name)
    if value < low or (high is not None and value > high):
        allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ProtocolError("out_of_range", f"{name} must be in {allowed}, got {value}", name)
    return value


def number(message: dict, name: str) -> float | None:
    value = message.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ProtocolError("wrong_type", f"{name} must be a finite number", name)
    return value


def choice(message: dict, name: str, options: tuple[str, ...]) -> str:
    value = message.get(name)
    if value is None:
        raise ProtocolError("missing_field", f"{name} is required", name)
    if value not in options:
        raise ProtocolError("invalid_value", f"{name} must be one of {', '.join(options)}", name)
    return value


def prompt_fields(message: dict) -> dict:
    """messages or text (exactly one), and params as an object."""
    has_messages, has_text = message.get("messages") is not None, message.get("text") is not None
    if has_messages == has_text:
        raise ProtocolError("missing_field", "start needs exactly one of messages or text", "messages")
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise ProtocolError("wrong_type", "params must be an object", "params")
    paused = message.get("paused", False)
    if not isinstance(paused, bool):
        raise ProtocolError("wrong_type", "paused must be true or false", "paused")
    return {"messages": message.get("messages"), "text": message.get("text"), "params": params, "paused": paused}
