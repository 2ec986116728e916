from django.contrib import admin

from . import daily
from .models import Gpu, GpuHour, HostMapping, MetricImport, MetricSource, TrafficSource


@admin.register(MetricSource)
class MetricSourceAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "kind",
        "url",
        "health",
        "is_paused",
        "last_success_at",
        "interval_seconds",
    ]
    list_filter = ["kind", "health", "is_paused"]
    search_fields = ["name", "url", "host"]
    readonly_fields = [
        "health",
        "last_error",
        "consecutive_failures",
        "last_attempt_at",
        "last_success_at",
        "last_failure_at",
        "last_samples",
        "created_at",
        "updated_at",
    ]


@admin.register(TrafficSource)
class TrafficSourceAdmin(admin.ModelAdmin):
    """A deployment's Prometheus request counter (configured here; polled with the metric
    sources)."""

    list_display = ["deployment", "url", "health", "is_paused", "last_success_at", "pulled_until"]
    list_filter = ["health", "is_paused"]
    search_fields = ["deployment__name", "url", "requests_query"]
    raw_id_fields = ["deployment"]
    readonly_fields = [
        "health",
        "last_error",
        "consecutive_failures",
        "last_attempt_at",
        "last_success_at",
        "last_failure_at",
        "last_samples",
        "pulled_until",
        "created_at",
        "updated_at",
    ]


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "uuid",
        "mig_instance",
        "model_name",
        "resource_label",
        "last_seen_at",
    ]
    list_filter = ["model_name"]
    search_fields = ["uuid", "host", "resource_label", "workload"]
    raw_id_fields = ["parent"]

    # An edit here moves how GPUs join the bill: the fleet page's daily rollup is rebuilt.
    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        daily.days_mark_all_later()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        daily.days_mark_all_later()

    def delete_queryset(self, request, queryset) -> None:
        super().delete_queryset(request, queryset)
        daily.days_mark_all_later()


@admin.register(HostMapping)
class HostMappingAdmin(admin.ModelAdmin):
    list_display = ["host", "resource_id", "note", "created_by", "updated_at"]
    search_fields = ["host", "resource_id", "note"]
    raw_id_fields = ["created_by"]

    # An edit here moves how GPUs join the bill: the fleet page's daily rollup is rebuilt.
    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        daily.days_mark_all_later()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        daily.days_mark_all_later()

    def delete_queryset(self, request, queryset) -> None:
        super().delete_queryset(request, queryset)
        daily.days_mark_all_later()


@admin.register(GpuHour)
class GpuHourAdmin(admin.ModelAdmin):
    """Read-only: the rollup is written by imports alone."""

    list_display = ["gpu", "hour", "samples", "util_mean", "idle_share", "power_watts"]
    date_hierarchy = "hour"
    search_fields = ["gpu__uuid", "gpu__host"]
    list_select_related = ["gpu"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(MetricImport)
class MetricImportAdmin(admin.ModelAdmin):
    list_display = ["path", "format", "status", "samples", "gpus", "hours", "created_at"]
    list_filter = ["status", "format"]
    search_fields = ["path", "error"]
    readonly_fields = [field.name for field in MetricImport._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
