"""A recording cut to what one section's diagram draws (docs/embedding.md, "What a widget downloads").

Most of a recording's bytes are arrays only one or two diagrams draw: attention weights (about 80 % of a
SmolLM2 run), the logit lens, the hidden-state norms, the sampling stages and the per-layer cache rows.
A slice keeps every payload and every small field, and of each heavy field only its scalars for the
sections that do not draw it: `attention.keys` and `kv.seq_len` stay, since other diagrams quote them.
A slice is itself a recording (a `src=` file may be one); its `slice` field says which sections it draws.
"""
from __future__ import annotations

from inference.wire.framing import join_message

# A payload's heavy field -> the sections (embeds.SECTIONS) whose diagrams draw its arrays.
DRAWN_BY = {
    "attention": frozenset({"attention"}),
    "lens": frozenset({"layers"}),
    "hidden_norms": frozenset({"layers"}),
    "stages": frozenset({"stages", "filter"}),
    "kv": frozenset({"kv", "kvcalc", "context"}),
}
SLICED_TYPES = ("prefill", "step")


def thin(value):
    """A heavy field as the sections that do not draw it get it: a mapping's scalars, else nothing."""
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if not isinstance(item, (dict, list))}
    return None


def sliced_payload(payload: dict, section: str) -> dict:
    """One payload with the heavy fields `section` does not draw thinned (a list-valued one is left out)."""
    if payload.get("type") not in SLICED_TYPES:
        return payload
    out = {}
    for key, value in payload.items():
        if key in DRAWN_BY and section not in DRAWN_BY[key]:
            value = thin(value)
            if value is None:
                continue
        out[key] = value
    return out


def joined(payloads: list[dict]) -> list[dict]:
    """Messages stored as a head and its `part`s (inference/wire/framing.py), each joined into one."""
    out, i = [], 0
    while i < len(payloads):
        count = payloads[i].get("parts", 0) if isinstance(payloads[i], dict) else 0
        out.append(join_message(payloads[i:i + 1 + count]) if count else payloads[i])
        i += 1 + count
    return out


def heavy_fields(section: str) -> set[str]:
    return {field for field, sections in DRAWN_BY.items() if section in sections}


def draws(section: str, sections) -> list[str]:
    """Those of `sections` that a slice for `section` draws as the whole recording would: none lacks a heavy field."""
    kept = heavy_fields(section)
    return [other for other in sections if heavy_fields(other) <= kept]


def group_of(section: str) -> str:
    """The name shared by the sections whose slices are the same bytes (the heavy fields they draw): "base" for none."""
    return "-".join(sorted(heavy_fields(section))) or "base"


def groups(sections) -> dict[str, list[str]]:
    """Each slice group (group_of) -> its sections, in the order of `sections`."""
    out: dict[str, list[str]] = {}
    for section in sections:
        out.setdefault(group_of(section), []).append(section)
    return out


def slice_recording(recording: dict, section: str, sections) -> dict:
    """The recording (as GET /api/runs/<id> returns it) with only what `section` draws, and a `slice` field saying so."""
    payloads = [sliced_payload(p, section) for p in joined(recording["payloads"])]
    return {**recording, "payloads": payloads, "slice": {"section": section, "draws": draws(section, sections)}}
