"""The billing sources pages (staff only) and the data freshness page (staff and leads)."""

from django.urls import path

from . import views_sources as views

urlpatterns = [
    path("billing/freshness/", views.data_freshness, name="data_freshness"),
    path("billing/sources/", views.source_list, name="billing_source_list"),
    path("billing/sources/new/", views.source_create, name="billing_source_create"),
    path("billing/sources/<int:source_pk>/", views.source_detail, name="billing_source_detail"),
    path("billing/sources/<int:source_pk>/edit/", views.source_edit, name="billing_source_edit"),
    path("billing/sources/<int:source_pk>/pause/", views.source_pause, name="billing_source_pause"),
    path("billing/sources/<int:source_pk>/poll/", views.source_poll, name="billing_source_poll"),
    path("billing/sources/<int:source_pk>/rerun/", views.source_rerun, name="billing_source_rerun"),
]
