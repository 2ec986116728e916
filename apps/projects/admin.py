from django.contrib import admin

from .models import AllocationRule, Project, TagKeyAlias


class AllocationRuleInline(admin.TabularInline):
    model = AllocationRule
    extra = 0
    fields = ["name", "field", "pattern", "priority", "workload", "experiment", "deployment"]
    raw_id_fields = ["experiment", "deployment"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "team", "monthly_budget", "created_at"]
    list_filter = ["team"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    autocomplete_fields = ["team"]
    date_hierarchy = "created_at"
    inlines = [AllocationRuleInline]


@admin.register(TagKeyAlias)
class TagKeyAliasAdmin(admin.ModelAdmin):
    list_display = ["key", "dimension", "created_at"]
    list_filter = ["dimension"]
    search_fields = ["key"]


@admin.register(AllocationRule)
class AllocationRuleAdmin(admin.ModelAdmin):
    list_display = ["name", "field", "pattern", "priority", "project", "workload", "created_by"]
    list_filter = ["field", "workload", "project__team"]
    search_fields = ["name", "pattern", "project__name"]
    autocomplete_fields = ["project"]
    raw_id_fields = ["experiment", "deployment", "created_by"]

    def save_model(self, request, obj, form, change):
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
