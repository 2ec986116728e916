from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("health/", views.health, name="health"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("apps.projects.urls")),
    path("", include("apps.experiments.urls")),
    path("", include("apps.deployments.urls")),
    path("", include("apps.accounts.urls")),
    path("", include("apps.api.urls")),
    path("", include("apps.gpu.urls")),
    path("", include("apps.spend.urls")),
    path("", include("apps.billing.urls_sources")),
    path("", include("apps.billing.urls_imports")),
    path("", include("apps.billing.urls_allocation")),
    path("", include("apps.billing.urls_model_api_keys")),
    path("", include("apps.insights.urls")),
    path("", include("apps.trackers.urls")),
    path("", include("apps.digests.urls")),
    path("", include("apps.insights.urls_build_or_call")),
]
