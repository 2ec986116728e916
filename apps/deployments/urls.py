from django.urls import path

from . import views

urlpatterns = [
    path("projects/<slug:slug>/models/new/", views.model_create, name="model_create"),
    path("models/<int:model_pk>/", views.model_detail, name="model_detail"),
    path("models/<int:model_pk>/edit/", views.model_edit, name="model_edit"),
    path(
        "projects/<slug:slug>/deployments/new/", views.deployment_create, name="deployment_create"
    ),
    path("deployments/<int:deployment_pk>/", views.deployment_detail, name="deployment_detail"),
    path("deployments/<int:deployment_pk>/edit/", views.deployment_edit, name="deployment_edit"),
    path(
        "deployments/<int:deployment_pk>/traffic/upload/",
        views.deployment_traffic_upload,
        name="deployment_traffic_upload",
    ),
]
