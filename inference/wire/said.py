"""Words a person reads that the server writes itself: an error's detail ("temperature: must be in [0, 2], got 5"),
a busy reason, a status line, a measurement's progress label.

`said(template, **values)` is a `str` (the English sentence, so logs, tests and `str(exc)` read as before) that
keeps its template and values, so the web side can say it again in the reader's language
(explainer/words.py: gettext of the template, then the values filled in). inference imports no Django: marking
is all it does. `manage.py makemessages` extracts `said("…")` like `gettext("…")` (explainer's makemessages
adds the keyword), so a template must be a string literal with named `%(value)s` placeholders, never an f-string.
"""
from __future__ import annotations

from collections.abc import Mapping

PACKED = "said"  # a Said across a process boundary (msgpack, JSON): {"said": template, "values": {...}}


class Said(str):
    """An English sentence that remembers how it was made: `template % values`."""

    template: str
    values: Mapping[str, object]

    def __new__(cls, template: str, values: Mapping[str, object]):
        text = super().__new__(cls, template % dict(values) if values else template)
        text.template, text.values = template, dict(values)
        return text

    def __reduce__(self):  # pickles (multiprocessing, caches) keep the template
        return (Said, (self.template, self.values))


def said(template: str, **values) -> Said:
    """Mark a sentence for the reader; values may be numbers, names or other `said` sentences."""
    return Said(template, values)


def packed(value):
    """A Said as plain data for a channel layer or a worker pipe (its values packed too); anything else as is."""
    if isinstance(value, Said):
        return {PACKED: value.template, "values": {k: packed(v) for k, v in value.values.items()}}
    return value


def unpacked(value):
    """The inverse of `packed`: plain data back into a Said; anything else as is."""
    if isinstance(value, Mapping) and set(value) == {PACKED, "values"} and isinstance(value[PACKED], str):
        return Said(value[PACKED], {k: unpacked(v) for k, v in value["values"].items()})
    return value


def told(exc: BaseException) -> str:
    """An exception's sentence, its template kept when it was `said` (str(exc) would give plain English)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Said) else str(exc)
