"""The upload page and the imports pages (staff only)."""

from django.urls import path

from . import views_imports as views

urlpatterns = [
    path("imports/", views.import_list, name="import_list"),
    path("imports/upload/", views.import_upload, name="import_upload"),
    path("imports/<int:run_pk>/", views.import_run_detail, name="import_run_detail"),
    path("imports/<int:run_pk>/progress/", views.import_run_progress, name="import_run_progress"),
    path("imports/<int:run_pk>/row/", views.import_run_row, name="import_run_row"),
]
