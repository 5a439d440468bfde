"""The one model this process explains: loaded lazily, once, and shared by every visitor."""
import threading

from django.conf import settings

from inference.checks import weights_checksum
from inference.loading import LoadedModel, ModelNotAvailable, load_model
from inference.shipped import notice_for

_lock = threading.Lock()
_shared: dict[str, object] = {}  # "model", "checksum", "draft": loaded once, shared by every visitor
_progress: dict[str, object] = {"what": "waiting to start", "done": 0.0}  # the first load, for the page


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


def is_loaded() -> bool:
    return "model" in _shared


def notice() -> dict | None:
    """What the page says about the configured model (name, size, origin, licence, what to expect)."""
    found = notice_for(settings.EXPLAINER_MODEL)
    return found.to_dict() if found else None


def model_status() -> dict:
    """What templates need: the description when loaded, else the reason it could not be."""
    try:
        return {"spec": settings.EXPLAINER_MODEL, "ok": True, "description": get_model().description.to_dict(), "error": None,
                "notice": notice()}
    except ModelNotAvailable as exc:
        return {"spec": settings.EXPLAINER_MODEL, "ok": False, "description": None, "error": str(exc), "notice": notice()}


_background: dict[str, threading.Thread] = {}
_start_lock = threading.Lock()  # not _lock: the loading thread holds that one for the whole load


def page_status(wait_s: float = 2.0) -> dict:
    """model_status for pages, which must not wait long for a first load: it goes on in the background
    (the article paints from a recorded example meanwhile) and the page says the model is loading."""
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
