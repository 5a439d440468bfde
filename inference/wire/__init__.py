"""The wire: everything about the messages of a run, in one place, with no Django.

- schema.py: the versioned payload schema (docs/protocol.md is generated from it) and validate_payload;
- records.py: the typed records the engine hands over (PrefillRecord, StepRecord, ...);
- builders.py: the run's messages built from those records (and checks', measurements' messages);
- packing.py: float arrays as float16/base64; framing.py: strict JSON text, and splitting into `part`s;
- upgrades.py: old recordings brought up to the current schema; validation.py: a recording checked field by field.
The web-only messages (status, busy, error, workshop) live in explainer/messages.py.
"""
