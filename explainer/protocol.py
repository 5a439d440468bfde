"""Validation of client frames (docs/protocol.md): each bad frame becomes a named error, nothing raises."""
from __future__ import annotations

import json
import math

from django.utils.functional import cached_property

from explainer.messages import error_payload
from explainer.words import in_language, scope_language
from inference.wire.framing import strict_text
from inference.wire.said import said, told

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


def encode_frame(message: dict, language: str | None = None) -> str:
    """Strict JSON out (inference/wire/framing.strict_text): a non-finite number becomes a `non_finite` error,
    never a frame with a bare NaN that a browser's JSON.parse refuses. That error is made after the message was
    put in the socket's language: said in `language` when given, else in English."""
    try:
        return strict_text(message)
    except ValueError:
        kind = message.get("type") if isinstance(message, dict) else None
        error = ProtocolError("non_finite", said("the server computed a number that is not finite (NaN or infinity) "
                                                 "in a %(kind)s message; it was not sent", kind=f"{kind!s:.40}"),
                              "type").as_message()
        return json.dumps(error if language is None else in_language(error, language))


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
        return scope_language(getattr(self, "scope", {}))  # (a consumer built by hand in a test has none)

    async def encode_json(self, content):
        return encode_frame(in_language(content, self.language), self.language)


def parse_frame(text: str | None, binary: bytes | None, max_bytes: int, types: tuple[str, ...] = CLIENT_TYPES) -> dict:
    """Decode one WebSocket frame into a client message whose type is one of `types`."""
    if binary is not None:
        raise ProtocolError("binary_frame", said("send JSON text frames, not binary"))
    if text is None or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ProtocolError("frame_too_large", said("frames are limited to %(max_bytes)s bytes", max_bytes=max_bytes))
    message = json_object(text)
    if nesting_depth(message) > MAX_DEPTH:
        raise ProtocolError("bad_json", said("objects and arrays may nest at most %(depth)s deep", depth=MAX_DEPTH))
    kind = message.get("type")
    if not isinstance(kind, str):
        raise ProtocolError("missing_field", said("every frame needs a string type"), "type")
    if kind not in types:
        raise ProtocolError("unknown_type", said("unknown type %(kind)s; one of %(types)s", kind=repr(kind[:40]),
                                                  types=", ".join(types)), "type")
    return message


def json_object(text: str | bytes) -> dict:
    """Strict JSON (no NaN/Infinity) that must be an object; anything else is a `bad_json` error."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise TooDeep("bad_json", said("not valid JSON: objects and arrays nest too deep to read")) from None
    except ValueError as exc:  # the parser's own words ("Expecting value: line 1 …") stay as they are: a value
        problem = told(exc) if len(str(exc)) <= 184 else str(exc)[:184]  # the sentence within 200 characters
        raise ProtocolError("bad_json", said("not valid JSON: %(problem)s", problem=problem)) from None
    if not isinstance(value, dict):
        raise ProtocolError("bad_json", said("expected a JSON object"))
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
    raise ValueError(said("%(name)s is not allowed", name=name))


def integer(message: dict, name: str, low: int, high: int | None = None, required: bool = True) -> int | None:
    value = message.get(name)
    if value is None:
        if required:
            raise ProtocolError("missing_field", said("%(name)s is required", name=name), name)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError("wrong_type", said("%(name)s must be an integer", name=name), name)
    if value < low or (high is not None and value > high):
        allowed = f"[{low}, {high}]" if high is not None else f">= {low}"  # numbers and signs: no words to translate
        raise ProtocolError("out_of_range", said("%(name)s must be in %(allowed)s, got %(value)s", name=name,
                                                 allowed=allowed, value=value), name)
    return value


def number(message: dict, name: str) -> float | None:
    value = message.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ProtocolError("wrong_type", said("%(name)s must be a finite number", name=name), name)
    return value


def choice(message: dict, name: str, options: tuple[str, ...]) -> str:
    value = message.get(name)
    if value is None:
        raise ProtocolError("missing_field", said("%(name)s is required", name=name), name)
    if value not in options:
        raise ProtocolError("invalid_value", said("%(name)s must be one of %(options)s", name=name,
                                                  options=", ".join(options)), name)
    return value


def prompt_fields(message: dict) -> dict:
    """messages or text (exactly one), and params as an object."""
    has_messages, has_text = message.get("messages") is not None, message.get("text") is not None
    if has_messages == has_text:
        raise ProtocolError("missing_field", said("start needs exactly one of messages or text"), "messages")
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise ProtocolError("wrong_type", said("params must be an object"), "params")
    paused = message.get("paused", False)
    if not isinstance(paused, bool):
        raise ProtocolError("wrong_type", said("paused must be true or false"), "paused")
    return {"messages": message.get("messages"), "text": message.get("text"), "params": params, "paused": paused}
