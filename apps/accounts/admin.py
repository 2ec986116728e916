from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from . import services
from .models import ApiToken, Membership, Organization, Team


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "currency",
        "time_zone",
        "idle_threshold_percent",
        "engineering_hourly_rate",
        "engineering_hours_per_month",
    ]

    def has_add_permission(self, request) -> bool:
        # One organisation per installation (DESIGN.md): the row is created on first use.
        return not Organization.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "lead_names", "member_count", "project_count"]
    search_fields = ["name", "slug", "memberships__user__username"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("memberships__user", "projects")

    @admin.display(description="leads")
    def lead_names(self, team: Team) -> str:
        leads = [
            m.user.get_username() for m in team.memberships.all() if m.role == Membership.Role.LEAD
        ]
        return ", ".join(sorted(leads)) or "–"

    @admin.display(description="people")
    def member_count(self, team: Team) -> int:
        return len(team.memberships.all())

    @admin.display(description="projects")
    def project_count(self, team: Team) -> int:
        return len(team.projects.all())


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__name"]
    autocomplete_fields = ["user", "team"]


class UserMembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["team"]
    verbose_name = "team membership"


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class CostsiteUserAdmin(UserAdmin):
    """Django's user admin, with the user's teams and roles on the same page."""

    inlines = [UserMembershipInline]
    list_filter = [*UserAdmin.list_filter, "memberships__role", "memberships__team"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff see every token and revoke a leaked one; secrets are never stored, so none is shown,
    and tokens are created by their owners on the settings page."""

    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset:
            services.api_token_revoke(token=token)
        self.message_user(request, f"{len(queryset)} token(s) revoked.")
