from django.urls import path

from . import views_build_or_call as views

urlpatterns = [
    path("build-or-call/", views.build_or_call_list, name="build_or_call_list"),
    path(
        "deployments/<int:deployment_pk>/build-or-call/",
        views.build_or_call_detail,
        name="build_or_call_detail",
    ),
]
