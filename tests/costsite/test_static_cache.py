"""Static files as production serves them (DEBUG off, `collectstatic` into the manifest storage,
WhiteNoise): the pages name the hashed files, and a hashed file is cached for at least a year and
marked immutable, so a second visit fetches no JS or CSS at all (bench/browser_pages.py measures
it); a name without its hash may change, so it is cached for a minute only."""

import re

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client

pytestmark = pytest.mark.django_db
YEAR = 365 * 24 * 60 * 60
FILES = ["vendor/plotly-costsite-3.7.0.min.js", "costsite/charts.js", "costsite/site.css"]


def _max_age(cache_control: str) -> int:
    found = re.search(r"max-age=(\d+)", cache_control)
    assert found, cache_control
    return int(found.group(1))


@pytest.fixture
def production_static(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    call_command("collectstatic", interactive=False, verbosity=0)
    return settings.STATIC_ROOT


def test_pages_name_hashed_static_files_served_immutable_for_a_year(
    production_static, member_client
):
    page = member_client.get("/").content.decode()
    client = Client()  # a new handler: WhiteNoise reads the collected files as it starts
    for name in FILES:
        url = static(name)
        stem, suffix = name.rsplit(".", 1)
        assert re.fullmatch(rf"/static/{re.escape(stem)}\.[0-9a-f]{{12}}\.{suffix}", url), url
        assert f'"{url}"' in page, f"the overview does not load {url}"
        response = client.get(url, headers={"Accept-Encoding": "br, gzip"})
        assert response.status_code == 200, url
        cache_control = response["Cache-Control"]
        assert "immutable" in cache_control, (url, cache_control)
        assert _max_age(cache_control) >= YEAR, (url, cache_control)
        assert "public" in cache_control, (url, cache_control)
        assert response.get("Content-Encoding") in ("br", "gzip"), url

    unhashed = client.get("/static/" + FILES[0])
    assert unhashed.status_code == 200
    assert "immutable" not in unhashed["Cache-Control"]
    assert _max_age(unhashed["Cache-Control"]) == 60
