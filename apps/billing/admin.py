from django.contrib import admin

from .models import Delivery, ImportRun


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
