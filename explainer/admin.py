from django.contrib import admin

from explainer.models import RecordedRun, WorkshopState


@admin.register(RecordedRun)
class RecordedRunAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "model_spec", "steps", "schema_version")
    list_filter = ("schema_version", "model_spec")
    search_fields = ("id", "model_spec")
    readonly_fields = ("id", "created_at", "model_spec", "messages", "params", "seed", "schema_version", "payloads")
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
