"""Fit messages under the transport's size cap: a message too large to send goes out as a head plus `part`s.

Decided by the encoded size (the JSON text the socket sends), never by element counts. The head is the
message itself with its largest strings and lists emptied and ``parts`` = how many `part` messages follow;
each part carries ``pieces`` [{path, text} | {path, items}] that the client appends, in order, to the value
at ``path`` (strings concatenated, lists extended). Once the last part is in, the message equals the original
(docs/protocol.md, "Messages larger than the send cap").
"""
from __future__ import annotations

import json

from .schema import SCHEMA_VERSION

PART_OVERHEAD = 256  # room for a part's own fields and one piece's path


class Encoded(dict):
    """A message with the text frame it goes out as (strict JSON: json.dumps as strict_text encodes it, or a
    recorded message's canonical text, explainer/services/run/provenance.py): made just before sending, so the
    size and the socket share one encoding. Never changed after it is made."""
    __slots__ = ("text",)

    def __init__(self, message: dict, text: str):
        super().__init__(message)
        self.text = text


def encoded(message: dict) -> dict:
    """The message with its text; as it is when it is not strict JSON (the send path names that error)."""
    if isinstance(message, Encoded):
        return message
    try:
        return Encoded(message, json.dumps(message, allow_nan=False))
    except ValueError:
        return message


def encoded_size(message) -> int:
    """Bytes of the text frame: Channels' send_json is json.dumps with its defaults (ASCII-escaped)."""
    text = getattr(message, "text", None)
    return len(text) if text is not None else len(json.dumps(message).encode("utf-8"))


def strict_text(message) -> str:
    """The text frame of a message: strict JSON (allow_nan=False; ValueError on NaN or infinity, which a
    browser's JSON.parse refuses). A message encoded before (Encoded) is its text."""
    text = getattr(message, "text", None)
    return text if text is not None else json.dumps(message, allow_nan=False)


def part_payload(of: str, index: int, count: int, pieces: list[dict]) -> dict:
    """One `part` of a message cut under the send cap."""
    return {"type": "part", "schema_version": SCHEMA_VERSION, "of": of, "index": index, "count": count, "pieces": pieces}


def split_message(message: dict, max_bytes: int) -> list[dict]:
    """[message] when it fits; else the head and its parts, each encoding to at most ``max_bytes``."""
    if max_bytes <= 2 * PART_OVERHEAD:
        raise ValueError(f"max_bytes must be more than {2 * PART_OVERHEAD}, got {max_bytes}")
    message = encoded(message)  # encoded once: the size here, the text for the socket
    size = encoded_size(message)
    if size <= max_bytes:
        return [message]
    text = getattr(message, "text", None)  # its encoding above, when it is strict JSON: no second one
    head = json.loads(text if text is not None else json.dumps(message))  # a deep copy the emptying cannot reach back through
    moved = []
    for path, value, value_size in sorted(_movable(head), key=lambda m: -m[2]):
        if size <= max_bytes - PART_OVERHEAD:
            break
        _set(head, path, "" if isinstance(value, str) else [])
        size -= value_size - 2  # "" and [] encode to 2 bytes
        moved.append((path, value))
    size = encoded_size(head)
    if size > max_bytes - PART_OVERHEAD:
        raise ValueError(f"a {message.get('type')} message cannot be cut under {max_bytes} bytes")
    parts = _parts(message.get("type"), moved, max_bytes)
    head["parts"] = len(parts)
    if any(encoded_size(part) > max_bytes for part in parts):
        raise ValueError(f"a {message.get('type')} message has a single item over {max_bytes} bytes")
    return [head, *parts]


def _movable(obj: dict, prefix: tuple = ()) -> list[tuple[tuple, object, int]]:
    """(path, value, encoded size) of every string and list reached through objects only."""
    out = []
    for key, value in obj.items():
        path = (*prefix, key)
        if isinstance(value, dict):
            out += _movable(value, path)
        elif isinstance(value, (str, list)) and path != ("type",) and len(value) > 1:
            out.append((path, value, encoded_size(value)))
    return out


def _set(obj: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _parts(of: str, moved: list, max_bytes: int) -> list[dict]:
    """Pack the moved values' pieces greedily into as few parts as fit."""
    room = max_bytes - PART_OVERHEAD
    parts, pieces, used = [], [], 0
    for path, value in moved:
        for piece in _pieces(list(path), value, room):
            piece_size = encoded_size(piece) + 2
            if pieces and used + piece_size > room:
                parts.append(pieces)
                pieces, used = [], 0
            pieces.append(piece)
            used += piece_size
    if pieces:
        parts.append(pieces)
    return [part_payload(of, i + 1, len(parts), p) for i, p in enumerate(parts)]


def _pieces(path: list, value, room: int) -> list[dict]:
    """Cut one value into pieces of at most ``room`` encoded bytes each (path included)."""
    room -= encoded_size({"path": path, "text": ""})
    if isinstance(value, str):
        return [{"path": path, "text": chunk} for chunk in _string_chunks(value, room)]
    out, items, used = [], [], 0
    for item in value:
        size = encoded_size(item) + 2
        if items and used + size > room:
            out.append({"path": path, "items": items})
            items, used = [], 0
        items.append(item)
        used += size
    out.append({"path": path, "items": items})
    return out


def _string_chunks(text: str, room: int) -> list[str]:
    """Consecutive slices whose JSON encodings each fit ``room`` (escapes counted)."""
    if encoded_size(text) == len(text) + 2:  # nothing escaped (base64, plain ASCII): cut by length
        step = max(room - 2, 1)
        return [text[i:i + step] for i in range(0, len(text), step)]
    chunks, start, used = [], 0, 2
    for i, ch in enumerate(text):
        width = encoded_size(ch) - 2
        if used + width > room and i > start:
            chunks.append(text[start:i])
            start, used = i, 2
        used += width
    chunks.append(text[start:])
    return chunks


def join_message(frames: list[dict]) -> dict:
    """The inverse of ``split_message`` (what the client does; used by tests and tools)."""
    head, *parts = frames
    message = json.loads(json.dumps(head))
    assert message.pop("parts", 0) == len(parts), "a split message needs every part"
    for part in parts:
        for piece in part["pieces"]:
            *outer, last = piece["path"]
            target = message
            for key in outer:
                target = target[key]
            if "text" in piece:
                target[last] += piece["text"]
            else:
                target[last].extend(piece["items"])
    return message
