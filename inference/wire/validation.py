"""Recorded payloads checked against schema.SCHEMA, nested types included, before they are stored.

validate_payload checks that each field is there with its top-level type. A recording comes from a
browser, so this also checks what the schema says inside those fields: a `packed` array's dtype, shape
and b64; a `session`'s model description against the dataclass that builds it; and that a list whose
items the schema describes as objects (`[{…}]`) holds objects.
"""
from __future__ import annotations

import dataclasses
import types
import typing

from inference.loading import ModelDescription
from .said import said
from .schema import SCHEMA, SchemaError, validate_payload

_SCALARS = {int: "int", float: "float", str: "str", bool: "bool"}


def _is(value, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _field_kinds(cls) -> dict[str, tuple[type, bool]]:
    """name -> (scalar type, nullable) from a dataclass's annotations (`int | None` is nullable int)."""
    kinds = {}
    for name, hint in typing.get_type_hints(cls).items():
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        kinds[name] = (next(a for a in args if a is not type(None)), type(None) in args)
    return kinds


MODEL_FIELDS = _field_kinds(ModelDescription)
# Fields with a default came after the first recordings: a recording made before them simply lacks them.
MODEL_OPTIONAL = {f.name for f in dataclasses.fields(ModelDescription)
                  if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}


def check_model_description(model, path: str) -> None:
    """The session's `model` object has every ModelDescription field, each of its type, and nothing else (the
    replay page renders it, and a key such as `items` would shadow the dict's own method in a template)."""
    extra = sorted(set(model) - set(MODEL_FIELDS))
    if extra:
        raise SchemaError(said("%(path)s: unknown fields %(fields)s", path=path, fields=str(extra[:5])))
    for name, (kind, nullable) in MODEL_FIELDS.items():
        if name not in model:
            if name in MODEL_OPTIONAL:
                continue
            raise SchemaError(said("%(path)s: missing %(missing)s", path=path, missing=repr(name)))
        value = model[name]
        if not (value is None and nullable) and not _is(value, kind):
            raise SchemaError(said("%(path)s: expected %(expected)s, got %(got)s", path=f"{path}.{name}",
                                   expected=_SCALARS.get(kind, kind.__name__), got=type(value).__name__))


def _check_packed(value: dict, path: str) -> None:
    shape = value["shape"]
    if not isinstance(value["dtype"], str) or not isinstance(value["b64"], str):
        raise SchemaError(said("%(path)s: dtype and b64 must be strings", path=path))
    if not isinstance(shape, list) or not all(_is(n, int) and n >= 0 for n in shape):
        raise SchemaError(said("%(path)s: expected a list of non-negative integers", path=f"{path}.shape"))


def _check_nested(obj: dict, spec: dict, path: str) -> None:
    """What validate_payload leaves unchecked inside fields it has already found present and typed."""
    for name, rule in spec.items():
        value, where = obj[name], f"{path}.{name}"
        if isinstance(rule, dict):
            _check_nested(value, rule, where)
        elif value is None:
            continue
        elif rule[0].rstrip("?") == "packed":
            _check_packed(value, where)
        elif rule[0].rstrip("?") == "list" and rule[1].startswith("[{"):
            bad = next((n for n, item in enumerate(value) if not isinstance(item, dict)), None)
            if bad is not None:
                raise SchemaError(said("%(path)s: expected object", path=f"{where}[{bad}]"))


def check_recorded_payload(payload: dict) -> None:
    """Raise SchemaError (naming the field) unless the payload matches SCHEMA all the way down."""
    validate_payload(payload)
    _check_nested(payload, SCHEMA[payload["type"]], payload["type"])
    if payload["type"] == "session":
        check_model_description(payload["model"], "session.model")
    if payload["type"] == "part":
        check_part_paths(payload["pieces"])


UNSAFE_KEYS = {"__proto__", "constructor", "prototype"}  # a page joining parts must never walk into these


def check_part_paths(pieces: list) -> None:
    """Each piece's path is a non-empty list of plain keys (strings, none of UNSAFE_KEYS) and it carries text
    or items: a recording is data, and the client refuses anything else (static/js/client.js PartAssembler)."""
    for n, piece in enumerate(pieces):
        path = piece.get("path")
        if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
            raise SchemaError(said("%(path)s: expected a non-empty list of strings", path=f"part.pieces[{n}].path"))
        if UNSAFE_KEYS & set(path):
            raise SchemaError(said("%(path)s: %(key)s is not a data key", path=f"part.pieces[{n}].path",
                                   key=repr(sorted(UNSAFE_KEYS & set(path))[0])))
        if not isinstance(piece.get("text"), str) and not isinstance(piece.get("items"), list):
            raise SchemaError(said("%(path)s: expected text (a string) or items (a list)", path=f"part.pieces[{n}]"))
