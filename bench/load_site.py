"""The WSGI application bench/load.py serves under gunicorn: costsite as it is, plus the trivial
view the pages are compared with (login required, "ok", behind the same middleware), so that
both are measured by the same server under the same load."""

import os

import django
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
django.setup()


def trivial(request):
    from django.http import HttpResponse

    return HttpResponse("ok")


def _urlpatterns():
    from django.contrib.auth.decorators import login_required
    from django.urls import path

    from costsite.urls import urlpatterns as site

    return [path("bench/trivial/", login_required(trivial), name="bench_trivial"), *site]


urlpatterns = _urlpatterns()
settings.ROOT_URLCONF = __name__

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after the URLconf is set)

application = get_wsgi_application()
