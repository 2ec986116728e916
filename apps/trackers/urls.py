from django.urls import path

from . import views

urlpatterns = [
    path("trackers/", views.source_list, name="tracker_source_list"),
    path("trackers/new/", views.source_create, name="tracker_source_create"),
    path("trackers/<int:source_pk>/edit/", views.source_edit, name="tracker_source_edit"),
    path("trackers/<int:source_pk>/pause/", views.source_pause, name="tracker_source_pause"),
    path("trackers/<int:source_pk>/poll/", views.source_poll, name="tracker_source_poll"),
    path("trackers/wandb/", views.wandb_upload, name="wandb_upload"),
]
