import logging

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse

logger = logging.getLogger(__name__)

# A check that has not answered in this long counts as failed: a load balancer's own timeout is
# a few seconds, and it should hear "which one" rather than nothing.
CHECK_TIMEOUT_SECONDS = 2


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as error:
        logger.warning("health: the database does not answer: %s", error)
        return "The database does not answer."
    return ""


def _broker() -> str:
    from costsite.celery import app

    try:
        with app.connection_for_write(connect_timeout=CHECK_TIMEOUT_SECONDS) as broker:
            broker.ensure_connection(max_retries=0, timeout=CHECK_TIMEOUT_SECONDS)
            broker.default_channel  # noqa: B018  (opens the channel: Redis answers or not)
    except Exception as error:  # kombu raises the transport's own errors, of many kinds
        logger.warning("health: the broker does not answer: %s", error)
        return "The broker does not answer."
    return ""


def health(request: HttpRequest) -> JsonResponse:
    """For load balancers and compose: the app answers, and so do its database and its broker
    (Redis: without it nothing is imported, recomputed or mailed). 503 naming the one that
    failed, so an operator sees which service to look at."""
    # With tasks run in process (the demo's default) there is no broker to ask.
    eager = settings.CELERY_TASK_ALWAYS_EAGER
    checks = (("database", _database),) if eager else (("database", _database), ("broker", _broker))
    failed = {name: error for name, check in checks if (error := check())}
    body = {
        "status": "failed" if failed else "ok",
        "database": "failed" if "database" in failed else "ok",
        "broker": "not used" if eager else "failed" if "broker" in failed else "ok",
    }
    if failed:
        body["errors"] = failed
    return JsonResponse(body, status=503 if failed else 200)
