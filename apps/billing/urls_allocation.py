"""The allocation page: tag key aliases, allocation rules, and the re-attribution they start."""

from django.urls import path

from . import views_allocation as views

urlpatterns = [
    path("allocation/", views.allocation, name="allocation"),
    path("allocation/aliases/new/", views.alias_create, name="allocation_alias_create"),
    path("allocation/aliases/<int:alias_pk>/edit/", views.alias_edit, name="allocation_alias_edit"),
    path(
        "allocation/aliases/<int:alias_pk>/delete/",
        views.alias_delete,
        name="allocation_alias_delete",
    ),
    path("allocation/rules/new/", views.rule_create, name="allocation_rule_create"),
    path("allocation/rules/<int:rule_pk>/edit/", views.rule_edit, name="allocation_rule_edit"),
    path(
        "allocation/rules/<int:rule_pk>/delete/", views.rule_delete, name="allocation_rule_delete"
    ),
    path(
        "allocation/runs/<int:attribution_run_pk>/",
        views.attribution_run_status,
        name="allocation_run_status",
    ),
]
