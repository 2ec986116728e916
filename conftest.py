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
