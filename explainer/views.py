"""Pages, the health check and recorded runs."""
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods

from explainer.embeds import SECTIONS, example_recording
from explainer.model_words import translated_status
from explainer.services.device import model_registry
from explainer.services import recordings, slices
from explainer.services.admission import limits
from explainer.services.admission.capacity import generating
from explainer.services.workshop import policy as workshop_policy
from explainer.words import in_language
from inference.wire.said import said


def _said_json(data, status: int = 200) -> JsonResponse:
    """A response that can carry the server's own sentences (an error, the model's loading progress), said in the
    request's language (LocaleMiddleware and explainer/i18n.py's `?lang=` have activated it)."""
    return JsonResponse(in_language(data, translation.get_language()), status=status)


@ensure_csrf_cookie  # the page saves recordings with POST /api/runs, which needs the token
def index(request):
    """The article page; a model that cannot load gives a 503 page that says why."""
    status = translated_status(model_registry.page_status())
    context = {"model": status, "compare_models": settings.EXPLAINER_COMPARE_MODELS, "workshop_on": workshop_policy.enabled()}
    return render(request, "index.html", context, status=200 if status["ok"] else 503)


def model_progress(request):
    """The model's load state for the page while it loads: never waits for the load."""
    status = model_registry.page_status(wait_s=0)
    return _said_json({"loading": bool(status.get("loading")), "ok": status["ok"], "progress": status.get("progress"),
                       "error": status["error"], "name": (status["description"] or {}).get("name")})


def healthz(request):
    """Health check that also proves the model loaded; `load`: this process's generation slots and sockets."""
    status = model_registry.model_status()
    if not status["ok"]:
        return _said_json({"status": "error", "error": status["error"]}, status=503)
    load = {"generating": generating.active, "slots": generating.limit, "sockets": limits.open_connections()}
    return JsonResponse({"status": "ok", "model": status["description"], "load": load})


# ---- recorded runs (docs/protocol.md, "Recorded runs") ----------------------------------------

def _error(code: str, message: str, field=None, status: int = 400) -> JsonResponse:
    return _said_json({"error": {"code": code, "message": message, "field": field}}, status=status)


def _refused(exc: "recordings.RecordingError") -> JsonResponse:
    response = _said_json(exc.as_dict(), status=exc.status)
    if getattr(exc, "retry_after_s", None):
        response["Retry-After"] = str(exc.retry_after_s)
    return response


@require_http_methods(["POST"])
def create_run(request):
    """Save a recording; CSRF-protected by CsrfViewMiddleware (browsers send X-CSRFToken); rate-limited per address."""
    try:
        recordings.admit(limits.request_address(request))  # before the body is read or parsed
        run = recordings.save_run(recordings.parse_body(request.body))
    except RequestDataTooBig:
        limit = settings.EXPLAINER_MAX_RECORDING_BYTES
        return _error("too_large", said("recordings are limited to %(limit)s bytes", limit=limit), status=413)
    except recordings.RecordingError as exc:
        return _refused(exc)
    return JsonResponse({"id": run.id, "url": f"/runs/{run.id}", "recorded_on_this_server": bool(run.signature)},
                        status=201)


def _recording(request, run_id: str) -> tuple[dict | None, JsonResponse | None]:
    """The stored run as GET /api/runs/<id> sends it, or the named refusal (404, or 422 for a damaged one)."""
    try:
        run = recordings.load(run_id)
        if run is None:
            return None, _error("not_found", said("no recorded run with this id"), "id", status=404)
        data = recordings.as_json(run)
    except recordings.RecordingError as exc:
        return None, _refused(exc)
    # Absolute: a copy of the recording hosted elsewhere still links back to its replay here (docs/embedding.md).
    return {**data, "article_url": request.build_absolute_uri(data["url"])}, None


@require_http_methods(["GET", "HEAD"])
def get_run(request, run_id: str):
    """The recording as JSON; a damaged one is a named 422, never a 500."""
    data, refusal = _recording(request, run_id)
    return refusal or JsonResponse(data)


# A recording never changes once saved, nor does a shipped example within a release: a year, as static files get.
SLICE_CACHE = "public, max-age=31536000, immutable"


def _slice_response(recording: dict, section: str) -> JsonResponse:
    if section not in SECTIONS:
        return _error("not_found", said("no section %(section)s; one of %(sections)s", section=repr(section[:40]),
                                        sections=", ".join(SECTIONS)), "section", status=404)
    response = JsonResponse(slices.slice_recording(recording, section, SECTIONS))
    response["Cache-Control"] = SLICE_CACHE
    return response


@require_http_methods(["GET", "HEAD"])
def get_run_section(request, run_id: str, section: str):
    """The recording cut to what one section draws (an embed's download); cached for good, compressed."""
    data, refusal = _recording(request, run_id)
    return refusal or _slice_response(data, section)


@require_http_methods(["GET", "HEAD"])
def get_example_section(request, example: str, section: str):
    """A shipped example (static/examples/) cut to what one section draws."""
    recording = example_recording(example)
    if recording is None:
        return _error("not_found", said("no example run with this id"), "id", status=404)
    return _slice_response(recording, section)


def recording_error_page(request, exc: "recordings.RecordingError"):
    """The page naming why a recording cannot be replayed, its sentence in the page's language."""
    error = in_language(exc.as_dict(), translation.get_language())["error"]  # {code, message, field}, as the API's
    return render(request, "recording_error.html", {"error": error}, status=exc.status)


@require_http_methods(["GET", "HEAD"])
def replay_page(request, run_id: str):
    """The article replaying a recording: no model is loaded, the page fetches /api/runs/<id>."""
    try:
        run = recordings.load(run_id)
        if run is None:
            raise Http404("no recorded run with this id")
        payloads = recordings.replayable_payloads(run)
    except recordings.RecordingError as exc:  # a named page, never a 500 (the model description is rendered)
        return recording_error_page(request, exc)
    session = payloads[0]  # checked: a recording starts with its session payload
    model = {"ok": True, "spec": run.model_spec, "description": session.get("model") or {"spec": run.model_spec}}
    recording = {"saved_at": run.created_at, "verified": recordings.verified(run)}
    return render(request, "index.html", {"model": model, "run_id": run.id, "recording": recording})
