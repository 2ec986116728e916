from django.urls import path

from . import views_model_api_keys as views

urlpatterns = [
    path("model-api/keys/", views.key_mapping_list, name="model_api_key_list"),
    path(
        "model-api/keys/<int:key_mapping_pk>/edit/",
        views.key_mapping_edit,
        name="model_api_key_edit",
    ),
    path(
        "model-api/keys/<int:key_mapping_pk>/delete/",
        views.key_mapping_delete,
        name="model_api_key_delete",
    ),
]
