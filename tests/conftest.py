"""Fixtures every test can use: the three standing users of STYLE.md (a lead and a member of the
project's team, an outsider who leads another team) plus staff, and clients logged in as each."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from apps.accounts.models import Membership

from .factories import MembershipFactory, ProjectFactory, StaffFactory, TeamFactory, UserFactory


@pytest.fixture(autouse=True)
def _empty_cache():
    """Every test starts with an empty cache, as a new deployment does. The pages' cached figures
    and parts are keyed by data versions that live in the database, which each test rolls back:
    two tests could otherwise meet the same version and URL with different data."""
    cache.clear()


@pytest.fixture(autouse=True)
def _fast_and_self_contained(settings):
    # Hashing with the production hasher costs a third of a second per user; tests need no strength.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Pages are rendered without a collectstatic manifest; the manifest storage is for production.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def team(db):
    return TeamFactory(name="Vision", slug="vision")


@pytest.fixture
def other_team(db):
    return TeamFactory(name="Language", slug="language")


@pytest.fixture
def project(team):
    return ProjectFactory(team=team, name="Image ranking", slug="image-ranking")


@pytest.fixture
def lead(team):
    return MembershipFactory(
        team=team, user=UserFactory(username="lena-lead"), role=Membership.Role.LEAD
    ).user


@pytest.fixture
def member(team):
    return MembershipFactory(
        team=team, user=UserFactory(username="max-member"), role=Membership.Role.MEMBER
    ).user


@pytest.fixture
def outsider(other_team):
    """Leads another team: being a lead elsewhere must grant nothing here."""
    return MembershipFactory(
        team=other_team, user=UserFactory(username="olga-outsider"), role=Membership.Role.LEAD
    ).user


@pytest.fixture
def staff(db):
    return StaffFactory(username="sam-staff")


def _client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def lead_client(lead):
    return _client_for(lead)


@pytest.fixture
def member_client(member):
    return _client_for(member)


@pytest.fixture
def outsider_client(outsider):
    return _client_for(outsider)


@pytest.fixture
def staff_client(staff):
    return _client_for(staff)


@pytest.fixture(scope="session")
def _sqlite_migrated(tmp_path_factory) -> Path:
    """A SQLite database `manage.py migrate` built once per session, in a subprocess as the
    SQLite tests run manage.py; `sqlite_database` hands each test a copy."""
    database = tmp_path_factory.mktemp("sqlite-migrated") / "demo.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    return database


@pytest.fixture
def sqlite_database(tmp_path, _sqlite_migrated) -> Path:
    """`tmp_path / "demo.sqlite3"`: a migrated SQLite database of the test's own (a copy: each
    migration of a fresh file took a quarter of a minute)."""
    database = tmp_path / "demo.sqlite3"
    shutil.copyfile(_sqlite_migrated, database)
    return database


# The browser the browser tests drive: Debian's chromium through Playwright's sync API (its own
# browser download is not used), with every console error or warning and page error collected in
# `page.problems`, so that a test can assert there was none (CSP violations count).
@pytest.fixture
def browser_page(monkeypatch):
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (the test command installs it)")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page.problems = []
        page.on(
            "console",
            lambda msg: msg.type in ("error", "warning") and page.problems.append(msg.text),
        )
        page.on("pageerror", lambda error: page.problems.append(str(error)))
        yield page
        browser.close()


# Property tests (Hypothesis): the bounded profile CI runs; bench/import_fuzz.py runs thousands.
# No example database: runs leave no files behind and every run draws afresh.
hypothesis_settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def eager_celery():
    """Tasks run in the caller's process (no worker), as the quick start runs them."""
    from costsite.celery import app

    was = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = was
