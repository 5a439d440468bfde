"""The server's own sentences in the reader's language (issue 28): a socket's language comes from `?lang=` on its
URL (the page sends its own), else the browser's Accept-Language; every message it is sent has its `said`
sentences (inference/wire/said.py) translated on the way out, in explainer/consumers.py's send_frame. The model's
text is never a `said` sentence, so it is never translated."""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs

from django.conf import settings
from django.utils import formats, translation
from django.utils.translation import trans_real

from explainer.i18n import QUERY, supported
from explainer.services.run.provenance import RECORDED
from inference.wire.said import Said, packed, unpacked

# The run's payloads as the page records them (explainer/services/run/provenance.py hashes them as they were sent,
# in English, so a recording made in French is still "recorded on this server"), and the parts they are split into.
AS_SENT = frozenset({*RECORDED, "part"})


def scope_language(scope: Mapping) -> str:
    """A socket's language: `?lang=` on its URL, else its Accept-Language header, else the site's default."""
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    chosen = supported((query.get(QUERY) or [None])[0])
    if chosen:
        return chosen
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    for code, _quality in trans_real.parse_accept_lang_header(accept):
        try:
            return trans_real.get_supported_language_variant(code)
        except LookupError:
            continue
    return settings.LANGUAGE_CODE


def say(value, language: str):
    """A `said` sentence (or its packed form) in `language`; a number in its way of writing; anything else as is."""
    value = unpacked(value)
    if not isinstance(value, Said):
        return value
    if language == settings.LANGUAGE_CODE:  # the sentence as it was written, values and all
        return str(value)
    with translation.override(language):
        template = translation.gettext(value.template)
        values = {name: _value(v, language) for name, v in value.values.items()}
    return template % values if values else template


def _value(value, language: str):
    if isinstance(value, float):
        return formats.number_format(value, use_l10n=True)
    return say(value, language)


def in_language(message, language: str):
    """A server → client message with every `said` sentence in it translated (the recorded payloads as they are)."""
    if isinstance(message, Mapping) and message.get("type") in AS_SENT:
        return message
    return _walk(message, lambda value: say(value, language) if isinstance(value, (Said, Mapping)) else value)


def packed_message(message):
    """A message about to cross a channel layer (msgpack keeps no str subclass): its sentences as plain data."""
    if isinstance(message, Mapping) and message.get("type") in AS_SENT:
        return message
    return _walk(message, packed)


def _walk(value, change):
    changed = change(value)
    if changed is not value:
        return changed
    if isinstance(value, Mapping):
        return {key: _walk(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_walk(item, change) for item in value]
    return value
