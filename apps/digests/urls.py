from django.urls import path

from . import views

urlpatterns = [
    path("digests/", views.digest_settings, name="digest_settings"),
    path("digests/preview/", views.digest_preview, name="digest_preview"),
    path("digests/unsubscribe/<str:token>/", views.digest_unsubscribe, name="digest_unsubscribe"),
]
