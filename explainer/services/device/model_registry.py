"""The one model this process explains: loaded lazily, once, and shared by every visitor."""
import threading
import time

from django.conf import settings

from inference.article_checks import weights_checksum
from inference.compare import quantized_copy
from inference.loading import LoadedModel, ModelNotAvailable, load_model
from inference.prefix_cache import PrefixCache, default_budget
from inference.shipped import notice_for
from inference.wire.said import said, told

_lock = threading.Lock()
_shared: dict[str, object] = {}  # "model", "checksum", "draft": loaded once, shared by every visitor
_progress: dict[str, object] = {"what": said("waiting to start"), "done": 0.0}  # the first load, for the page


def _record_progress(what: str, done: float) -> None:
    _progress.update(what=what, done=round(done, 3))


def _once(key: str, load):
    """Load under the lock, re-checked there: concurrent first requests must not load the weights twice."""
    if key not in _shared:
        with _lock:
            if key not in _shared:
                _shared.update(load())
    return _shared[key]


def _load_target() -> dict:
    loaded = load_model(settings.EXPLAINER_MODEL, device=settings.EXPLAINER_DEVICE, progress=_record_progress)
    budget = settings.EXPLAINER_PREFIX_CACHE_BYTES
    loaded.prefix_cache = PrefixCache(default_budget(loaded.model.device) if budget is None else budget)
    return {"model": loaded, "checksum": weights_checksum(loaded.model)}


def get_model() -> LoadedModel:
    """Return the shared model for settings.EXPLAINER_MODEL, loading it on first use."""
    return _once("model", _load_target)


def initial_checksum() -> dict:
    """The weights' fingerprint taken when they were loaded (the 'no training happened' check)."""
    get_model()
    return _shared["checksum"]


def get_draft() -> LoadedModel:
    """The draft model for speculative decoding (settings.EXPLAINER_DRAFT_MODEL; it must share the vocabulary)."""
    return _once("draft", lambda: {"draft": load_model(settings.EXPLAINER_DRAFT_MODEL, device=settings.EXPLAINER_DEVICE)})


def get_int8() -> LoadedModel:
    """The served model with int8 weights (inference/compare.py quantized_copy): built once, on the first compare."""
    return _once("int8", lambda: {"int8": quantized_copy(get_model(), 8)})


def get_compare_model(spec: str) -> LoadedModel:
    """A model of settings.EXPLAINER_COMPARE_MODELS, loaded once on its first compare (ModelNotAvailable: not listed)."""
    if spec not in settings.EXPLAINER_COMPARE_MODELS:
        raise ModelNotAvailable(said("%(spec)s is not one of this server's compare models (%(listed)s)", spec=spec,
                                     listed=", ".join(settings.EXPLAINER_COMPARE_MODELS) or said("none")))
    key = f"compare:{spec}"
    return _once(key, lambda: {key: load_model(spec, device=settings.EXPLAINER_DEVICE)})


def is_loaded() -> bool:
    return "model" in _shared


def notice() -> dict | None:
    """What the page says about the configured model (name, size, origin, licence, what to expect)."""
    found = notice_for(settings.EXPLAINER_MODEL)
    return found.to_dict() if found else None


def model_status() -> dict:
    """What templates need: the description when loaded, else the reason it could not be."""
    if settings.EXPLAINER_WORKERS:  # a Daphne process in REDIS_URL mode: the workers hold the model
        return workers_status()
    try:
        return {"spec": settings.EXPLAINER_MODEL, "ok": True, "description": get_model().description.to_dict(), "error": None,
                "notice": notice()}
    except ModelNotAvailable as exc:
        return {"spec": settings.EXPLAINER_MODEL, "ok": False, "description": None, "error": told(exc), "notice": notice()}


_background: dict[str, threading.Thread] = {}
_start_lock = threading.Lock()  # not _lock: the loading thread holds that one for the whole load


def page_status(wait_s: float = 2.0) -> dict:
    """model_status for pages, which must not wait long for a first load: it goes on in the background
    (the article paints from a recorded example meanwhile) and the page says the model is loading.
    With inference workers (REDIS_URL) this process never loads it: the page shows what a worker published."""
    if settings.EXPLAINER_WORKERS:
        return workers_status()
    if not is_loaded():
        with _start_lock:
            thread = _background.get("load")
            if thread is None:
                thread = _background["load"] = threading.Thread(target=_load_quietly, name="model-load", daemon=True)
                thread.start()
        thread.join(wait_s)
        if thread.is_alive():
            return {"spec": settings.EXPLAINER_MODEL, "ok": True, "loading": True, "description": None, "error": None,
                    "notice": notice(), "progress": dict(_progress)}
    return model_status()


def check_device(device: str) -> None:
    """Refuse a device this machine does not have with one line, before torch fails with a traceback."""
    import torch

    if device == "auto" or not device.startswith("cuda"):
        return
    if not torch.cuda.is_available():
        raise SystemExit(f"EXPLAINER_DEVICE={device}: this machine has no CUDA device that torch "
                         f"{torch.__version__} can use; set EXPLAINER_DEVICE=auto (or cpu)")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise SystemExit(f"EXPLAINER_DEVICE={device}: this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s) (cuda:0 … cuda:{torch.cuda.device_count() - 1}); set EXPLAINER_DEVICE=auto")


def load_for_worker() -> None:
    """An inference worker loads its model before it listens, then publishes its description for the pages;
    a model or device it cannot load ends the process with one line."""
    import os

    import torch

    index = os.environ.get("EXPLAINER_WORKER_INDEX", "")
    if settings.EXPLAINER_DEVICE == "auto" and index.isdigit() and torch.cuda.device_count() > 1:
        settings.EXPLAINER_DEVICE = f"cuda:{int(index) % torch.cuda.device_count()}"  # one GPU per worker
    check_device(settings.EXPLAINER_DEVICE)
    try:
        get_model()
    except ModelNotAvailable as exc:
        raise SystemExit(f"inference worker: {exc}") from None
    for attempt in range(40):  # Redis may still be starting (`make workshop` starts them together)
        try:
            return publish_description()
        except Exception as exc:  # the pages then say "loading"; the worker still serves
            failure = exc
            time.sleep(0.5)
    print(f"inference worker: could not publish the model description: {failure}")


DESCRIPTION_KEY = "explainer:model-description"  # the shared cache (Redis in REDIS_URL mode)


def publish_description() -> None:
    """An inference worker tells the pages (served by Daphne processes without the model) what it loaded."""
    from django.core.cache import cache

    cache.set(DESCRIPTION_KEY, get_model().description.to_dict(), None)


def workers_status() -> dict:
    """model_status for a Daphne process in REDIS_URL mode: the workers' model, never loaded here."""
    from django.core.cache import cache

    try:
        description = cache.get(DESCRIPTION_KEY)
    except Exception:  # Redis unreachable: the page still renders, with the recorded example
        description = None
    return {"spec": settings.EXPLAINER_MODEL, "ok": True, "loading": description is None,
            "description": description, "error": None, "notice": notice()}


def _load_quietly() -> None:
    try:
        get_model()
    except ModelNotAvailable:
        pass  # model_status() reports it to the page
    finally:
        _background.pop("load", None)


def reset() -> None:
    """Forget the loaded models (tests switch specs between cases)."""
    with _lock:
        _shared.clear()
