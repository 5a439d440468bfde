"""A recording's fields checked one by one (docs/protocol.md, "Recorded runs"): each refusal names its field.

Used on saving (POST /api/runs) and again on reading a stored row, so a row damaged in the database is
refused by name (`broken_recording`, 422) instead of reaching a page.
"""
from __future__ import annotations

from django.conf import settings

from explainer.protocol import nesting_depth
from inference.prompting import PromptError, validate_messages
from inference.sampling import ParamError, SamplingParams
from inference.wire.said import said, told
from inference.wire.schema import SCHEMA, SchemaError
from inference.wire.upgrades import UpgradeError, upgrade as wire_upgrade
from inference.wire.validation import check_recorded_payload

MAX_DEPTH = 16  # a real recording nests 7 deep (body > payloads > [] > step > ... ); twice that and more is refused
CHARS_PER_PROMPT_TOKEN = 64  # the messages' text is bounded by the prompt's token cap at this many characters a token
MAX_MESSAGE = 300  # a refusal's sentence, in characters: it can quote what was sent


class RecordingError(ValueError):
    """A recording the server refuses; becomes {"error": {code, message, field}} with status 400 (or 413, 422, 429, 507)."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.field, self.status = code, message, field, status

    def as_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


def bounded(message: str) -> str:
    """At most MAX_MESSAGE characters; a longer sentence is cut, in English (it quotes what was sent; rare)."""
    return message if len(message) <= MAX_MESSAGE else str(message)[:MAX_MESSAGE]


def upgrade(payloads: list[dict], from_version: int) -> list[dict]:
    """Copies of ``payloads`` brought up to SCHEMA_VERSION; a version the wire cannot upgrade is a RecordingError."""
    try:
        return wire_upgrade(payloads, from_version)
    except UpgradeError as exc:
        raise RecordingError(exc.code, exc.message, "schema_version") from None


def depth(data: dict) -> None:
    """Objects and arrays nest at most MAX_DEPTH deep (counted without recursion), named by the top-level field."""
    for name, value in data.items():
        if nesting_depth(value, MAX_DEPTH) + 1 > MAX_DEPTH:
            raise RecordingError("too_deep", said("objects and arrays may nest at most %(depth)s deep", depth=MAX_DEPTH),
                                 name)


def messages(value) -> list[dict]:
    """As a live start takes them (at most 64), their text within the prompt's token cap."""
    try:
        checked = validate_messages(value)
    except PromptError as exc:
        raise RecordingError(exc.code, said("%(field)s %(problem)s", field=exc.field, problem=exc.message),
                             exc.field) from None
    limit = CHARS_PER_PROMPT_TOKEN * settings.EXPLAINER_MAX_PROMPT_TOKENS
    total = sum(len(m["content"]) + len(m["role"]) for m in checked)
    if total > limit:
        raise RecordingError("out_of_range", said("messages hold %(total)s characters; at most %(limit)s", total=total,
                                                  limit=limit), "messages")
    return checked


def params(value) -> dict:
    """The sampling parameters as a live start takes them (inference/sampling.py, the server's max_new_tokens cap)."""
    if not isinstance(value, dict):
        raise RecordingError("wrong_type", said("params must be an object"), "params")
    try:
        SamplingParams.from_dict(value, max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
    except ParamError as exc:
        raise RecordingError(exc.code, bounded(said("%(field)s: %(problem)s", field=f"params.{exc.field}",
                                                    problem=exc.message)), f"params.{exc.field}") from None
    except (TypeError, ValueError) as exc:
        raise RecordingError("invalid_param", bounded(said("%(field)s: %(problem)s", field="params", problem=told(exc))),
                             "params") from None
    return value


def seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
        raise RecordingError("wrong_type", said("seed must be an integer in [-2**63, 2**63)"), "seed")
    return value


def model_spec(value) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 300:
        raise RecordingError("wrong_type", said("model_spec must be a non-empty string (at most %(limit)s characters)",
                                                limit=300), "model_spec")
    return value


def _schema_version(payloads: list[dict]) -> int:
    versions = {p.get("schema_version") for p in payloads if "schema_version" in p}
    if len(versions) != 1:
        raise RecordingError("invalid_value", said("every payload must carry the same schema_version"), "payloads")
    version = versions.pop()
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecordingError("wrong_type", said("schema_version must be an integer"), "payloads")
    return version


def payloads(value) -> tuple[list[dict], int]:
    """The payloads as recorded and their schema version, once every one checks against the current schema."""
    if not isinstance(value, list) or not value:
        raise RecordingError("wrong_type", said("payloads must be a non-empty list of payload objects"), "payloads")
    for n, p in enumerate(value):
        if not isinstance(p, dict):
            raise RecordingError("wrong_type", said("each payload must be an object"), f"payloads[{n}]")
        if p.get("type") not in SCHEMA:
            raise RecordingError("unknown_type", said("unknown payload type %(type)s", type=repr(str(p.get("type"))[:40])),
                                 f"payloads[{n}].type")
    version = _schema_version(value)
    current = upgrade(value, version)
    kinds = [p["type"] for p in current]
    if kinds[0] != "session" or "prefill" not in kinds:
        raise RecordingError("invalid_value", said("a recording starts with a session payload and has a prefill"),
                             "payloads")
    for n, p in enumerate(current):  # every payload, field by field and nested (inference/wire/validation.py)
        try:
            check_recorded_payload(p)
        except SchemaError as exc:
            raise RecordingError("invalid_payload", bounded(told(exc)), f"payloads[{n}]") from None
    return value, version
