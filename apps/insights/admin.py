from django.contrib import admin
from django.db import transaction

from apps.spend.figures import findings_version_bump

from .days import days_forget, days_seen
from .models import (
    BuildOrCallInputs,
    BuildOrCallSettings,
    Finding,
    FindingEvent,
    GpuInstancePrice,
    GpuTypeMemory,
    InsightsSettings,
    ModelApiPrice,
    RecomputeRun,
    StorageEgressPrice,
)


class FindingEventInline(admin.TabularInline):
    model = FindingEvent
    extra = 0
    readonly_fields = ["from_status", "to_status", "snoozed_until", "note", "by", "at"]
    can_delete = False


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ["kind", "subject_key", "project", "status", "rank_amount", "last_seen"]
    list_filter = ["kind", "status"]
    search_fields = ["subject_key", "resource_id", "reason"]
    readonly_fields = ["wasted", "savings_per_month", "rank_amount", "evidence", "first_seen"]
    inlines = [FindingEventInline]

    def get_readonly_fields(self, request, obj=None):
        # A finding's kind and subject are its identity (the recompute finds it by them, and its
        # hours and day rollup follow its kind): shown once it exists, not edited.
        fields = super().get_readonly_fields(request, obj)
        return [*fields, "kind", "subject_key"] if obj is not None else fields

    # An edit here moves the findings version, as the workflow's changes do (figures cached
    # by the pages are read afresh).
    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        findings_version_bump()

    # A delete also rebuilds the findings' day rollup over the days they were seen (their hours
    # go with them, and with them what they shared with other findings), in one transaction:
    # no page reads those days half rebuilt.
    @transaction.atomic
    def delete_model(self, request, obj) -> None:
        seen = days_seen(Finding.objects.filter(pk=obj.pk))
        super().delete_model(request, obj)
        days_forget(seen)
        findings_version_bump()

    @transaction.atomic
    def delete_queryset(self, request, queryset) -> None:
        seen = days_seen(queryset)
        super().delete_queryset(request, queryset)
        days_forget(seen)
        findings_version_bump()


@admin.register(RecomputeRun)
class RecomputeRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "status", "start", "end", "reason", "created_at", "finished_at"]
    list_filter = ["status"]


@admin.register(InsightsSettings)
class InsightsSettingsAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "unattributed_threshold",
        "idle_gpu_min_share_percent",
        "notebook_idle_hours",
        "data_starved_target_percent",
    ]

    def has_add_permission(self, request) -> bool:
        return not InsightsSettings.objects.exists()  # one row


@admin.register(GpuInstancePrice)
class GpuInstancePriceAdmin(admin.ModelAdmin):
    list_display = [
        "provider",
        "instance_type",
        "gpu_type",
        "gpu_count",
        "region",
        "on_demand_per_hour",
        "spot_per_hour",
        "currency",
        "source",
        "as_of",
    ]
    list_filter = ["provider", "gpu_type"]
    search_fields = ["instance_type", "region", "gpu_type"]


@admin.register(GpuTypeMemory)
class GpuTypeMemoryAdmin(admin.ModelAdmin):
    list_display = ["gpu_type", "vendor", "memory_gb", "source", "as_of"]


@admin.register(ModelApiPrice)
class ModelApiPriceAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "mode", "input_per_token", "output_per_token", "as_of"]
    list_filter = ["provider", "mode"]
    search_fields = ["name"]


@admin.register(StorageEgressPrice)
class StorageEgressPriceAdmin(admin.ModelAdmin):
    list_display = ["provider", "service", "item", "region", "volume_tier", "unit", "price"]
    list_filter = ["provider", "service"]


# -- Build or call (issue 19) ---------------------------------------------------------------------


@admin.register(BuildOrCallInputs)
class BuildOrCallInputsAdmin(admin.ModelAdmin):
    list_display = [
        "deployment",
        "api_model",
        "expected_requests_per_hour",
        "engineering_hours_per_month",
        "capacity_per_replica_hour",
        "updated_by",
        "updated_at",
    ]
    search_fields = ["deployment__name", "api_model"]
    raw_id_fields = ["deployment"]
    readonly_fields = ["updated_by"]


@admin.register(BuildOrCallSettings)
class BuildOrCallSettingsAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "low_requests_per_hour",
        "high_requests_per_hour",
        "spiky_idle_share",
        "spiky_variation",
        "steady_variation",
    ]

    def has_add_permission(self, request) -> bool:
        return not BuildOrCallSettings.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
