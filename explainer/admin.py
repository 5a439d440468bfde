"""The admin: recorded runs (read-only) and the workshop's state, behind a login with a per-address lockout."""
from django.contrib import admin
from django.http import HttpResponse

from explainer.models import RecordedRun, WorkshopState
from explainer.services.admission.lockout import Lockout

LOGIN = Lockout("admin")  # the host's backoff (explainer/services/admission/lockout.py), its own count


def guarded_login(request, **kwargs):
    """/admin/login/: Django's admin login, refused (429) while this address is locked out for wrong passwords."""
    if request.method == "POST" and (wait := LOGIN.wait(request)):
        return HttpResponse(f"Too many wrong passwords from this address: wait {wait:.0f} s.", status=429,
                            content_type="text/plain", headers={"Retry-After": str(int(wait) + 1)})
    response = admin.site.login(request, **kwargs)
    if request.method == "POST":  # a login that worked redirects; a wrong one shows the form again
        LOGIN.succeeded(request) if response.status_code == 302 else LOGIN.failed(request)
    return response


@admin.register(RecordedRun)
class RecordedRunAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "model_spec", "steps", "schema_version")
    list_filter = ("schema_version", "model_spec")
    search_fields = ("id", "model_spec")
    readonly_fields = ("id", "created_at", "model_spec", "messages", "params", "seed", "schema_version", "payloads",
                       "size_bytes", "signature")
    date_hierarchy = "created_at"

    @admin.display(description="steps")
    def steps(self, obj):
        return obj.steps

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(WorkshopState)
class WorkshopStateAdmin(admin.ModelAdmin):
    """The workshop host's pins and limits (the host page sets them; an admin can reset them here)."""

    list_display = ("id", "own_runs_allowed", "max_new_tokens", "max_sessions", "pins", "updated_at")
    readonly_fields = ("broadcast", "updated_at")
