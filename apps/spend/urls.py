"""The attribution pages' URLs (the overview itself is `home`, in apps/projects/urls.py)."""

from django.urls import path

from . import views, views_storage

urlpatterns = [
    path("spend.csv", views.overview_export, name="overview_export"),
    path("unattributed/", views.unattributed, name="unattributed"),
    path("storage/", views_storage.storage_page, name="storage"),
    path("unattributed/spend.csv", views.unattributed_export, name="unattributed_export"),
    path("unattributed/claim/", views.unattributed_claim, name="unattributed_claim"),
    path("projects/<slug:slug>/spend.csv", views.project_spend_export, name="project_spend_export"),
    path("models/<int:model_pk>/spend.csv", views.model_spend_export, name="model_spend_export"),
    path(
        "experiments/<int:experiment_pk>/spend.csv",
        views.experiment_spend_export,
        name="experiment_spend_export",
    ),
    path(
        "deployments/<int:deployment_pk>/spend.csv",
        views.deployment_spend_export,
        name="deployment_spend_export",
    ),
]
