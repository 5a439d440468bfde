"""The serving view's live measurements: run on this server's model, off the event loop.

The experiments (prefill_decode, batch, quantize, speculative) take seconds of model work, so they run
after every waiting visitor step (executors.BACKGROUND) and in slices (before each of their forward passes,
the visitor calls waiting then run first: executors.DeviceExecutor.slices), one at a time per process, and per client
address at most one fresh one for each experiment at once, then one every EXPLAINER_MEASURE_INTERVAL_S (a
visitor can measure each serving section; a flood cannot), and are cached per server, model and prompt
(the article's prompt is everyone's before they run one): a reply carries `measured_at` (UTC) and `cached`. kv and capacity are arithmetic on the config: computed each time.
"""
import re
from datetime import datetime, timezone

from django.conf import settings

from explainer.protocol import ProtocolError, choice, integer
from explainer.services.device import model_registry
from explainer.services.admission.limits import TokenBucket
from explainer.services.device.executors import BACKGROUND, executor_for, run_on
from inference import languages, serving
from inference.loading import ModelNotAvailable
from inference.wire.builders import measured_payload, serving_payload
from inference.prompting import build_prompt
from inference.wire.said import said, told

DEFAULT_PROMPT = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
NEW_TOKENS = 16  # short runs: a measurement holds the device's executor while it runs
CALCULATED = ("kv", "capacity", "languages")  # no model run: never cached, never rate-limited
EXPERIMENTS = 6  # prefill_decode, batch, speculative, quantize, prefix, languages_prefill: one of each back to back
_cache: dict[tuple, dict] = {}  # (model, device, what, draft, prompt ids) -> the `serving` reply
_fresh: dict[str, TokenBucket] = {}  # client address -> its fresh measurements' bucket
_running: list[str] = []  # the measurement in flight in this process (at most one)


class MeasureBusy(Exception):
    """A fresh measurement is refused for now; the message is the `busy` reason."""

    def __init__(self, reason: str, retry_after_s: float):
        super().__init__(reason)
        self.retry_after_s = retry_after_s


def cache_key(what: str, message: dict, device: str, session) -> tuple:
    # None: the article's prompt; prefill_decode times random tokens, so no prompt changes it
    ids = tuple(session.prompt.ids) if session is not None and what != "prefill_decode" else None
    variant = message.get("draft") if what == "speculative" else session.cached_tokens if what == "prefix" and session else None
    if what == "languages_prefill":  # the lines the visitor edited, not their prompt
        ids, variant = None, tuple((line.lang, line.text) for line in language_lines(message))
    return (settings.EXPLAINER_MODEL, device, what, variant, ids)


async def serve(what: str, message: dict, session, device: str, address: str | None, progress=None) -> dict:
    """The `serving` reply: computed, cached, or measured now (raises MeasureBusy when it may not be).
    ``progress(done, total, label)`` is called from the model thread before each part of a fresh one."""
    if what.startswith("languages"):
        language_lines(message)  # refused by name before any slot or token is spent
    if what in CALCULATED:
        return {**await run_on(device, measure, what, message, session), "measured_at": None, "cached": False}
    key = cache_key(what, message, device, session)
    if key in _cache:
        return {**_cache[key], "cached": True}
    _admit(address)
    _running.append(what)
    try:
        reply = await run_on(device, measure_in_slices, device, what, message, session, progress, priority=BACKGROUND)
    finally:
        _running.clear()
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    _cache[key] = measured_payload(reply, at)
    return {**_cache[key], "cached": False}


def _admit(address: str | None) -> None:
    """One fresh measurement at a time per process; per address, EXPERIMENTS at once, then one every
    EXPLAINER_MEASURE_INTERVAL_S."""
    if _running:
        raise MeasureBusy(said("another measurement (%(what)s) is running; its result is cached for everyone",
                               what=_running[0]), 5)
    interval = settings.EXPLAINER_MEASURE_INTERVAL_S
    if address is None or interval <= 0:
        return
    bucket = _fresh.setdefault(address, TokenBucket(1 / interval, EXPERIMENTS))
    wait = bucket.take()
    if wait:
        every = int(interval) if float(interval).is_integer() else interval  # as {interval:g} wrote it: 60, not 60.0
        raise MeasureBusy(said("%(count)s new measurements per address, then one every %(every)s s", count=EXPERIMENTS,
                               every=every), round(wait, 1))


def forget() -> None:
    """Drop the cache and the rate state (tests; a new model)."""
    _cache.clear()
    _fresh.clear()
    _running.clear()


def prompt_ids(loaded, session) -> list[int]:
    """The visitor's own prompt when a run exists, else the article's."""
    return list(session.prompt.ids) if session is not None else build_prompt(loaded.tokenizer, messages=DEFAULT_PROMPT).ids


def measure_in_slices(device: str, what: str, message: dict, session, progress=None) -> dict:
    """measure(), yielding to waiting visitor calls before each of the model's forward passes; `data` says how
    many visitor calls ran in between (their time is inside this measurement's timings)."""
    executor, model = executor_for(device), model_registry.get_model().model
    before = executor.between_slices
    with executor.slices(model):
        reply = measure(what, message, session, progress)
    reply["data"]["visitor_calls_between"] = executor.between_slices - before
    return reply


def measure(what: str, message: dict, session, progress=None) -> dict:
    """Run one measurement (in the device executor) and wrap it as a `serving` message."""
    loaded = model_registry.get_model()
    if what == "prefill_decode":
        data = serving.prefill_decode(loaded, progress=progress)
    elif what == "kv":
        data = serving.kv_calculator(loaded)
    elif what == "capacity":
        memory = integer(message, "memory_bytes", 1, 1 << 50, required=False) or 80 * (1 << 30)
        context = integer(message, "context_tokens", 1, 10_000_000, required=False) or loaded.description.context_window
        data = serving.capacity(loaded, memory, context)
    elif what == "speculative":
        data = _speculative(message, loaded, prompt_ids(loaded, session), progress)
    elif what == "prefix":
        data = _prefix(loaded, session, progress)
    elif what == "languages":
        data = languages.language_costs(loaded, language_lines(message))
    elif what == "languages_prefill":
        data = languages.language_prefills(loaded, language_lines(message), progress)
    else:
        data = _experiment(what, loaded, prompt_ids(loaded, session), progress)
    prompt = "none" if what in CALCULATED + ("prefill_decode", "languages_prefill") else "article" if session is None else "yours"
    return serving_payload(what, data, prompt)


LANG_TAG = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}")


def language_lines(message: dict) -> list:
    """`lines`: [{lang, name, text}], 1 to MAX_LINES of them (the visitor's own sentences); the shipped six
    (one meaning in English, French, Spanish, Chinese, Japanese and Arabic) when absent."""
    lines = message.get("lines")
    if lines is None:
        return list(languages.SENTENCES)
    if not isinstance(lines, list) or not 1 <= len(lines) <= languages.MAX_LINES:
        raise ProtocolError("out_of_range", said("lines must be a list of 1 to %(most)s lines", most=languages.MAX_LINES),
                            "lines")
    out = []
    for n, line in enumerate(lines):
        text, lang, name = (line.get(k) if isinstance(line, dict) else None for k in ("text", "lang", "name"))
        if not isinstance(text, str) or not 1 <= len(text) <= languages.MAX_CHARS or not text.strip():
            raise ProtocolError("out_of_range", said("lines[%(n)s].text must be 1 to %(most)s characters", n=n,
                                                     most=languages.MAX_CHARS), "lines")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise ProtocolError("invalid_value", said("lines[%(n)s].text is not valid Unicode (a lone surrogate)", n=n),
                                "lines")
        if not isinstance(lang, str) or not LANG_TAG.fullmatch(lang):
            raise ProtocolError("invalid_value", said("lines[%(n)s].lang must be a language tag such as fr or zh-Hans", n=n),
                                "lines")
        if not isinstance(name, str) or not 1 <= len(name) <= 40:
            raise ProtocolError("out_of_range", said("lines[%(n)s].name must be 1 to 40 characters", n=n), "lines")
        out.append(languages.Line(lang, name, text))
    return out


def _prefix(loaded, session, progress=None) -> dict:
    """The visitor's prefill with the prefix its own prefill found in the cache, and without; on the article's
    prompt (no run yet), with the longest prefix of it the server's cache holds now."""
    from inference.prefix_saving import prefix_saving
    ids, store = prompt_ids(loaded, session), loaded.prefix_cache
    if session is not None:
        cached = session.cached_tokens
    else:
        cached = store.matched_length(ids, len(ids) - 1) if store is not None else 0
    return {**prefix_saving(loaded, ids, cached, progress=progress), "cache_on": bool(store is not None and store.enabled)}


def _experiment(what: str, loaded, ids: list[int], progress=None) -> dict:
    if what == "batch":
        from inference.batching import batch_experiment
        return batch_experiment(loaded, ids, (1, 2, 4, 8), NEW_TOKENS, progress=progress)
    if what == "quantize":
        from inference.quantize import quantize_experiment
        return quantize_experiment(loaded, ids, 8, NEW_TOKENS, progress=progress)
    raise ProtocolError("invalid_value", said("unknown measurement %(what)s", what=what), "what")


def _speculative(message: dict, loaded, ids: list[int], progress=None) -> dict:
    """`draft`: "model" (the bundled pair's draft) or "ngram" (prompt lookup, any model); by default the
    draft model when the bundled model is served, else prompt lookup."""
    from inference.speculative import NGRAM, speculative_report
    default = "model" if settings.EXPLAINER_MODEL == "bundled" else NGRAM
    method = choice({"draft": message.get("draft") or default}, "draft", ("model", NGRAM))
    if method == NGRAM:
        return speculative_report(loaded, NGRAM, ids, NEW_TOKENS * 2, settings.EXPLAINER_SPECULATIVE_K, progress=progress)
    try:
        draft = model_registry.get_draft()
    except ModelNotAvailable as exc:
        raise ProtocolError("model_error", told(exc)) from None
    return speculative_report(loaded, draft, ids, NEW_TOKENS * 2, settings.EXPLAINER_SPECULATIVE_K, progress=progress)
