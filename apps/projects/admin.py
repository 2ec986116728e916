from django.contrib import admin

from apps.billing.services import attribution_schedule

from .models import AllocationRule, Project, TagKeyAlias


class ReattributesHistory:
    """Aliases and rules decide who owns past spend: any change re-attributes the history (in a
    task, after the change commits)."""

    # save_related runs after save_model on every admin save, with inlines (a project's rules).
    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        attribution_schedule()

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        attribution_schedule()

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        attribution_schedule()


class AllocationRuleInline(admin.TabularInline):
    model = AllocationRule
    extra = 0
    fields = ["name", "field", "pattern", "priority", "workload", "experiment", "deployment"]
    raw_id_fields = ["experiment", "deployment"]


@admin.register(Project)
class ProjectAdmin(ReattributesHistory, admin.ModelAdmin):
    list_display = ["name", "slug", "team", "monthly_budget", "created_at"]
    list_filter = ["team"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    autocomplete_fields = ["team"]
    date_hierarchy = "created_at"
    inlines = [AllocationRuleInline]


@admin.register(TagKeyAlias)
class TagKeyAliasAdmin(ReattributesHistory, admin.ModelAdmin):
    list_display = ["key", "dimension", "created_at"]
    list_filter = ["dimension"]
    search_fields = ["key"]


@admin.register(AllocationRule)
class AllocationRuleAdmin(ReattributesHistory, admin.ModelAdmin):
    list_display = ["name", "field", "pattern", "priority", "project", "workload", "created_by"]
    list_filter = ["field", "workload", "project__team"]
    search_fields = ["name", "pattern", "project__name"]
    autocomplete_fields = ["project"]
    raw_id_fields = ["experiment", "deployment", "created_by"]

    def save_model(self, request, obj, form, change):
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
