from django.contrib import admin

from .models import Alert, Delivery, DigestSettings, Subscription


@admin.register(DigestSettings)
class DigestSettingsAdmin(admin.ModelAdmin):
    list_display = ["__str__", "send_hour", "budget_alerts", "spike_alerts", "spike_multiple"]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "active", "frequency", "minimum_amount", "updated_at"]
    list_filter = ["active", "frequency"]
    filter_horizontal = ["projects"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """`unknown` deliveries are listed first: a person decides whether they arrived."""

    list_display = ["email", "period_start", "period_end", "status", "attempts", "sent_at"]
    list_filter = ["status", "frequency"]
    search_fields = ["email"]
    readonly_fields = ["claimed_at", "sent_at", "message_id", "error", "wasted", "findings"]
    actions = ["mark_failed"]

    @admin.action(description="Send again on the next run (only if it certainly did not arrive)")
    def mark_failed(self, request, queryset):
        count = queryset.filter(status=Delivery.Status.UNKNOWN).update(
            status=Delivery.Status.FAILED, permanent=False
        )
        self.message_user(request, f"{count} unknown deliveries will be sent again.")


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["project", "kind", "amount", "threshold", "day", "opened_at", "cleared_at"]
    list_filter = ["kind"]
