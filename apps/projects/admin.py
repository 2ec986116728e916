from django.contrib import admin

from .models import AllocationRule, Project, TagKeyAlias
from .services import ownership_announce, resource_uses_changed, resource_uses_snapshot


def _changed(obj, verb: str) -> str:
    return f"{obj._meta.verbose_name.capitalize()} “{obj}” {verb} in the admin"


def _deleted(queryset, count: int) -> str:
    return f"{count} {queryset.model._meta.verbose_name_plural} deleted in the admin"


class ReattributesHistory:
    """Aliases and rules decide who owns past spend: any change re-attributes the history (in a
    task, after the change commits)."""

    # save_related runs after save_model on every admin save, with inlines (a project's rules).
    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        verb = "changed" if change else "added"
        ownership_announce(reason=_changed(form.instance, verb), created_by=request.user)

    def delete_model(self, request, obj):
        reason = _changed(obj, "deleted")
        super().delete_model(request, obj)
        ownership_announce(reason=reason, created_by=request.user)

    def delete_queryset(self, request, queryset):
        reason = _deleted(queryset, queryset.count())
        super().delete_queryset(request, queryset)
        ownership_announce(reason=reason, created_by=request.user)


class AnnouncesResourceUses:
    """The admin of an owner of resource uses (an experiment, a deployment; their `resources`
    inline): the ids whose use changed have their billed history attributed again, as on the
    owner's page and through the API."""

    def save_related(self, request, form, formsets, change):
        before = resource_uses_snapshot(uses=form.instance.resources) if change else []
        super().save_related(request, form, formsets, change)
        resource_uses_changed(uses=form.instance.resources, before=before)

    def delete_model(self, request, obj):
        ids = {use[0] for use in resource_uses_snapshot(uses=obj.resources)}
        reason = _changed(obj, "deleted")
        super().delete_model(request, obj)
        ownership_announce(resource_ids=ids, reason=reason, created_by=request.user)

    def delete_queryset(self, request, queryset):
        ids = set(queryset.values_list("resources__resource_id", flat=True)) - {None}
        reason = _deleted(queryset, queryset.count())
        super().delete_queryset(request, queryset)
        ownership_announce(resource_ids=ids, reason=reason, created_by=request.user)


class AnnouncesResourceUse:
    """The admin of single resource uses: the old and new id are attributed again."""

    def save_model(self, request, obj, form, change):
        ids = {obj.resource_id}
        if change:
            ids |= set(type(obj).objects.filter(pk=obj.pk).values_list("resource_id", flat=True))
        super().save_model(request, obj, form, change)
        ownership_announce(resource_ids=ids, reason=_changed(obj, "saved"), created_by=request.user)

    def delete_model(self, request, obj):
        reason = _changed(obj, "deleted")
        super().delete_model(request, obj)
        ownership_announce(resource_ids={obj.resource_id}, reason=reason, created_by=request.user)

    def delete_queryset(self, request, queryset):
        ids = set(queryset.values_list("resource_id", flat=True))
        reason = _deleted(queryset, queryset.count())
        super().delete_queryset(request, queryset)
        ownership_announce(resource_ids=ids, reason=reason, created_by=request.user)


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
