from django.urls import path

from . import views

urlpatterns = [
    path(
        "projects/<slug:slug>/experiments/new/", views.experiment_create, name="experiment_create"
    ),
    path("experiments/<int:experiment_pk>/", views.experiment_detail, name="experiment_detail"),
    path("experiments/<int:experiment_pk>/edit/", views.experiment_edit, name="experiment_edit"),
]
