"""The serving view's live measurements: run on this server's model, off the event loop."""
from django.conf import settings

from explainer.protocol import ProtocolError, choice, integer
from explainer.services import model_registry
from inference import serving
from inference.loading import ModelNotAvailable
from inference.payload import SCHEMA_VERSION
from inference.prompting import build_prompt

DEFAULT_PROMPT = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
NEW_TOKENS = 16  # short runs: a measurement holds the device's executor while it runs


def prompt_ids(loaded, session) -> list[int]:
    """The visitor's own prompt when a run exists, else the article's."""
    return list(session.prompt.ids) if session is not None else build_prompt(loaded.tokenizer, messages=DEFAULT_PROMPT).ids


def measure(what: str, message: dict, session) -> dict:
    """Run one measurement (in the device executor) and wrap it as a `serving` message."""
    loaded = model_registry.get_model()
    if what == "prefill_decode":
        data = serving.prefill_decode(loaded)
    elif what == "kv":
        data = serving.kv_calculator(loaded)
    elif what == "capacity":
        memory = integer(message, "memory_bytes", 1, 1 << 50, required=False) or 80 * (1 << 30)
        context = integer(message, "context_tokens", 1, 10_000_000, required=False) or loaded.description.context_window
        data = serving.capacity(loaded, memory, context)
    elif what == "speculative":
        data = _speculative(message, loaded, prompt_ids(loaded, session))
    else:
        data = _experiment(what, loaded, prompt_ids(loaded, session))
    return {"type": "serving", "schema_version": SCHEMA_VERSION, "what": what, "data": data}


def _experiment(what: str, loaded, ids: list[int]) -> dict:
    if what == "batch":
        from inference.batching import batch_experiment
        return batch_experiment(loaded, ids, (1, 2, 4, 8), NEW_TOKENS)
    if what == "quantize":
        from inference.quantize import quantize_experiment
        return quantize_experiment(loaded, ids, 8, NEW_TOKENS)
    raise ProtocolError("invalid_value", f"unknown measurement {what}", "what")


def _speculative(message: dict, loaded, ids: list[int]) -> dict:
    """`draft`: "model" (the bundled pair's draft) or "ngram" (prompt lookup, any model); by default the
    draft model when the bundled model is served, else prompt lookup."""
    from inference.speculative import NGRAM, speculative_report
    default = "model" if settings.EXPLAINER_MODEL == "bundled" else NGRAM
    method = choice({"draft": message.get("draft") or default}, "draft", ("model", NGRAM))
    if method == NGRAM:
        return speculative_report(loaded, NGRAM, ids, NEW_TOKENS * 2, settings.EXPLAINER_SPECULATIVE_K)
    try:
        draft = model_registry.get_draft()
    except ModelNotAvailable as exc:
        raise ProtocolError("model_error", str(exc)) from None
    return speculative_report(loaded, draft, ids, NEW_TOKENS * 2, settings.EXPLAINER_SPECULATIVE_K)
