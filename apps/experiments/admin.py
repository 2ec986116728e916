from django.contrib import admin

from apps.projects.admin import AnnouncesResourceUse, AnnouncesResourceUses

from .models import Experiment, ExperimentResource


class ExperimentResourceInline(admin.TabularInline):
    model = ExperimentResource
    extra = 1
    fields = ["resource_id", "started_at", "ended_at"]


@admin.register(Experiment)
class ExperimentAdmin(AnnouncesResourceUses, admin.ModelAdmin):
    list_display = [
        "name",
        "project",
        "kind",
        "status",
        "started_at",
        "ended_at",
        "gpu_count",
        "gpu_type",
        "is_spot",
    ]
    list_filter = ["status", "kind", "is_spot", "gpu_type", "region", "project__team"]
    search_fields = ["name", "external_id", "project__name", "resources__resource_id"]
    autocomplete_fields = ["project", "model"]
    raw_id_fields = ["created_by"]
    date_hierarchy = "started_at"
    list_select_related = ["project"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [ExperimentResourceInline]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "project",
                    "name",
                    "kind",
                    "status",
                    "started_at",
                    "ended_at",
                    "model",
                    "external_id",
                    "tags",
                ]
            },
        ),
        ("Hardware", {"fields": ["instance_type", "gpu_type", "gpu_count", "is_spot", "region"]}),
        ("Record", {"fields": ["created_by", "created_at", "updated_at"]}),
    ]


@admin.register(ExperimentResource)
class ExperimentResourceAdmin(AnnouncesResourceUse, admin.ModelAdmin):
    list_display = ["resource_id", "experiment", "started_at", "ended_at"]
    search_fields = ["resource_id", "experiment__name"]
    list_filter = ["experiment__project__team"]
    raw_id_fields = ["experiment"]
    list_select_related = ["experiment"]
