from django.contrib import admin

from apps.projects.admin import AnnouncesResourceUse, AnnouncesResourceUses

from .models import Deployment, DeploymentResource, Model


class DeploymentInline(admin.TabularInline):
    model = Deployment
    extra = 0
    fields = ["name", "project", "serving_pattern", "replicas", "instance_type", "gpu_count"]
    show_change_link = True
    autocomplete_fields = ["project"]


@admin.register(Model)
class MLModelAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "external_id", "created_at"]
    list_filter = ["project__team"]
    search_fields = ["name", "external_id", "project__name"]
    autocomplete_fields = ["project"]
    list_select_related = ["project"]
    inlines = [DeploymentInline]


class DeploymentResourceInline(admin.TabularInline):
    model = DeploymentResource
    extra = 1
    fields = ["resource_id", "started_at", "ended_at"]


@admin.register(Deployment)
class DeploymentAdmin(AnnouncesResourceUses, admin.ModelAdmin):
    list_display = [
        "name",
        "model",
        "project",
        "serving_pattern",
        "replicas",
        "instance_type",
        "gpu_count",
        "data_residency",
        "is_fine_tuned",
    ]
    list_filter = ["serving_pattern", "data_residency", "is_fine_tuned", "is_spot", "project__team"]
    search_fields = [
        "name",
        "external_id",
        "model__name",
        "project__name",
        "resources__resource_id",
    ]
    autocomplete_fields = ["project", "model"]
    list_select_related = ["model", "project"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [DeploymentResourceInline]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "project",
                    "model",
                    "name",
                    "external_id",
                    "serving_pattern",
                    "replicas",
                    "latency_objective_ms",
                    "cold_start_seconds",
                    "started_at",
                    "ended_at",
                    "tags",
                ]
            },
        ),
        ("Constraints", {"fields": ["data_residency", "is_fine_tuned"]}),
        ("Hardware", {"fields": ["instance_type", "gpu_type", "gpu_count", "is_spot", "region"]}),
        ("Record", {"fields": ["created_at", "updated_at"]}),
    ]


@admin.register(DeploymentResource)
class DeploymentResourceAdmin(AnnouncesResourceUse, admin.ModelAdmin):
    list_display = ["resource_id", "deployment", "started_at", "ended_at"]
    search_fields = ["resource_id", "deployment__name"]
    list_filter = ["deployment__project__team"]
    raw_id_fields = ["deployment"]
    list_select_related = ["deployment"]
