"""Root pytest configuration: plugins and fixtures every test directory can use."""

import pytest

pytest_plugins = ["tests.celery_worker", "tests.servers"]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test databases, with every alias's connection closed before they go.

    The billing import writes progress through a second alias ("progress"); left open, that
    connection keeps PostgreSQL from dropping the test database at the end of the session.
    """
    yield
    from django.db import connections

    with django_db_blocker.unblock():
        connections.close_all()


@pytest.fixture(autouse=True)
def _cache_emptied():
    """Every test starts with an empty cache: its database is rolled back, and with it the spend
    data version, so figures another test cached under the same version must not be read."""
    from django.core.cache import cache

    cache.clear()
    yield
