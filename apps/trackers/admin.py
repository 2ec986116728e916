from django.contrib import admin

from .models import TrackedRun, TrackerSource


@admin.register(TrackerSource)
class TrackerSourceAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "health", "is_paused", "last_success_at", "interval_minutes"]
    list_filter = ["health", "is_paused", "allow_writes"]
    search_fields = ["name", "url"]
    exclude = ["token"]
    readonly_fields = [
        "health",
        "last_error",
        "consecutive_failures",
        "last_attempt_at",
        "last_success_at",
        "last_failure_at",
        "polled_from",
        "last_runs",
        "last_unassigned",
        "created_at",
        "updated_at",
    ]


@admin.register(TrackedRun)
class TrackedRunAdmin(admin.ModelAdmin):
    list_display = ["run_id", "tracker", "tracker_status", "experiment", "source", "cost_written"]
    list_filter = ["tracker", "tracker_status", "is_finished"]
    search_fields = ["run_id", "experiment__name"]
    raw_id_fields = ["experiment"]
    readonly_fields = ["created_at", "updated_at"]
