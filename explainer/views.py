"""Pages and the health check."""
from django.http import JsonResponse
from django.shortcuts import render

from explainer.services import model_registry


def index(request):
    """The article page; a model that cannot load gives a 503 page that says why."""
    status = model_registry.model_status()
    return render(request, "index.html", {"model": status}, status=200 if status["ok"] else 503)


def healthz(request):
    """Health check that also proves the model loaded."""
    status = model_registry.model_status()
    if not status["ok"]:
        return JsonResponse({"status": "error", "error": status["error"]}, status=503)
    return JsonResponse({"status": "ok", "model": status["description"]})
