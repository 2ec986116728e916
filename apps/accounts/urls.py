from django.urls import path

from . import views

urlpatterns = [
    path("settings/tokens/", views.token_list, name="token_list"),
    path("settings/tokens/<int:token_pk>/revoke/", views.token_revoke, name="token_revoke"),
]
