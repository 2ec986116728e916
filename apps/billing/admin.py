from django.contrib import admin

from .models import BillingSource, Delivery, ImportRun, SourceObject, SourcePoll


@admin.register(ImportRun)
class ImportRunAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "display_name",
        "status",
        "format",
        "rows_done",
        "line_items",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status"]
    readonly_fields = [f.name for f in ImportRun._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False  # runs are made by the command, the pages and the API


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "billing_account_id",
        "billing_period_start",
        "status",
        "format",
        "rows",
        "line_items",
        "created_at",
    ]
    list_filter = ["status", "format"]
    readonly_fields = [f.name for f in Delivery._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(BillingSource)
class BillingSourceAdmin(admin.ModelAdmin):
    """Editing here changes the source as the sources page does; its health is the poll's."""

    list_display = ["name", "kind", "location", "health", "is_paused", "interval_minutes"]
    list_filter = ["kind", "health", "is_paused"]
    search_fields = ["name", "path", "bucket", "prefix"]
    readonly_fields = [
        "health",
        "last_error",
        "consecutive_failures",
        "last_attempt_at",
        "last_success_at",
        "last_failure_at",
        "created_at",
        "updated_at",
    ]


@admin.register(SourcePoll)
class SourcePollAdmin(admin.ModelAdmin):
    list_display = [
        "pk",
        "source",
        "status",
        "started_at",
        "files_found",
        "files_new",
        "files_changed",
        "files_unchanged",
        "runs_started",
    ]
    list_filter = ["status", "source"]
    readonly_fields = [f.name for f in SourcePoll._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False  # polls are made by the schedule and the sources page


@admin.register(SourceObject)
class SourceObjectAdmin(admin.ModelAdmin):
    """Deleting a row here makes the next poll import that file again."""

    list_display = ["key", "source", "size", "signature", "import_run", "imported_at"]
    list_filter = ["source"]
    search_fields = ["key"]
    readonly_fields = [f.name for f in SourceObject._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
