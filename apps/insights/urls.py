from django.urls import path

from . import views

urlpatterns = [
    path("waste/", views.waste, name="waste"),
    path("waste.csv", views.waste_csv, name="waste_csv"),
    path("waste/bulk/", views.waste_bulk, name="waste_bulk"),
    path("waste/<int:finding_pk>/", views.finding_detail, name="finding_detail"),
    path("waste/<int:finding_pk>/action/", views.finding_action, name="finding_action"),
]
