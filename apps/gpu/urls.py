from django.urls import path

from . import views, views_traffic

urlpatterns = [
    path("gpus/", views.fleet, name="gpu_fleet"),
    path("gpus/<int:gpu_pk>/", views.gpu_detail, name="gpu_detail"),
    path("gpus/sources/", views.source_list, name="gpu_source_list"),
    path("gpus/sources/new/", views.source_create, name="gpu_source_create"),
    path("gpus/sources/<int:source_pk>/edit/", views.source_edit, name="gpu_source_edit"),
    path("gpus/sources/<int:source_pk>/pause/", views.source_pause, name="gpu_source_pause"),
    path("gpus/sources/<int:source_pk>/poll/", views.source_poll, name="gpu_source_poll"),
    path("gpus/hosts/", views.host_mapping_list, name="gpu_host_mapping_list"),
    path(
        "gpus/hosts/<int:mapping_pk>/edit/", views.host_mapping_edit, name="gpu_host_mapping_edit"
    ),
    path(
        "gpus/hosts/<int:mapping_pk>/delete/",
        views.host_mapping_delete,
        name="gpu_host_mapping_delete",
    ),
    # A deployment's Prometheus traffic sources (its team's lead sets them up).
    path(
        "deployments/<int:deployment_pk>/traffic/sources/",
        views_traffic.traffic_sources,
        name="deployment_traffic_sources",
    ),
    path(
        "deployments/<int:deployment_pk>/traffic/sources/new/",
        views_traffic.traffic_source_create,
        name="deployment_traffic_source_create",
    ),
    path(
        "deployments/<int:deployment_pk>/traffic/sources/<int:traffic_source_pk>/edit/",
        views_traffic.traffic_source_edit,
        name="deployment_traffic_source_edit",
    ),
    path(
        "deployments/<int:deployment_pk>/traffic/sources/<int:traffic_source_pk>/pause/",
        views_traffic.traffic_source_pause,
        name="deployment_traffic_source_pause",
    ),
    path(
        "deployments/<int:deployment_pk>/traffic/sources/<int:traffic_source_pk>/poll/",
        views_traffic.traffic_source_poll,
        name="deployment_traffic_source_poll",
    ),
]
