"""The one model this process explains: loaded lazily, once, and shared by every visitor."""
import threading

from django.conf import settings

from inference.checks import weights_checksum
from inference.loading import LoadedModel, ModelNotAvailable, load_model

_lock = threading.Lock()
_loaded: LoadedModel | None = None
_checksum: dict | None = None


def get_model() -> LoadedModel:
    """Return the shared model for settings.EXPLAINER_MODEL, loading it on first use."""
    global _loaded
    if _loaded is None:
        with _lock:
            # Re-check under the lock: concurrent first requests must not load the weights twice.
            if _loaded is None:
                loaded = load_model(settings.EXPLAINER_MODEL, device=settings.EXPLAINER_DEVICE)
                _set_checksum(weights_checksum(loaded.model))
                _loaded = loaded
    return _loaded


def _set_checksum(value: dict) -> None:
    global _checksum
    _checksum = value


def initial_checksum() -> dict:
    """The weights' fingerprint taken when they were loaded (the 'no training happened' check)."""
    get_model()
    return _checksum


_draft: LoadedModel | None = None


def get_draft() -> LoadedModel:
    """The draft model for speculative decoding (settings.EXPLAINER_DRAFT_MODEL; it must share the vocabulary)."""
    global _draft
    if _draft is None:
        with _lock:
            if _draft is None:
                _draft = load_model(settings.EXPLAINER_DRAFT_MODEL, device=settings.EXPLAINER_DEVICE)
    return _draft


def is_loaded() -> bool:
    return _loaded is not None


def model_status() -> dict:
    """What templates need: the description when loaded, else the reason it could not be."""
    try:
        return {"spec": settings.EXPLAINER_MODEL, "ok": True, "description": get_model().description.to_dict(), "error": None}
    except ModelNotAvailable as exc:
        return {"spec": settings.EXPLAINER_MODEL, "ok": False, "description": None, "error": str(exc)}


def reset() -> None:
    """Forget the loaded model (tests switch specs between cases)."""
    global _loaded, _draft
    with _lock:
        _loaded = _draft = None
