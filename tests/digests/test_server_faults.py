"""Fault tests: PostgreSQL and Redis restarted while a real Celery worker mails the digests
through a slow SMTP server on loopback. On throwaway servers of the test's own
(tests/servers.py), never the shared ones.

- Redis killed mid-run and started again empty: the run needs only the database and the mail
  server, and finishes; everyone gets one mail.
- PostgreSQL restarted mid-run: the run stops; what it had claimed and not marked is settled by
  the reaper as `unknown` (never mailed twice), and the run sent again mails everyone else once.
"""

import time
from collections import Counter
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from django.db import connection
from django.utils import timezone

from apps.accounts.models import Membership
from apps.digests.models import Delivery
from apps.digests.services import DELIVERY_STALE_AFTER
from apps.digests.tasks import deliveries_reap_task, digests_send_task
from costsite.celery import app
from tests.factories import MembershipFactory, UserFactory

from .conftest import SEND_AT
from .test_smtp import free_port
from .test_worker_faults import LEADS, SlowInbox

pytestmark = [
    pytest.mark.worker,
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]


@pytest.fixture
def leads(world, team) -> set[str]:
    emails = set()
    for number in range(LEADS):
        user = UserFactory(username=f"lead-{number:02}", email=f"lead-{number:02}@example.com")
        MembershipFactory(team=team, user=user, role=Membership.Role.LEAD)
        emails.add(user.email)
    return emails


@pytest.fixture
def mail():
    inbox = SlowInbox()
    port = free_port()
    server = Controller(inbox, hostname="127.0.0.1", port=port)
    server.start()
    env = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(port),
    }
    try:
        yield inbox, env
    finally:
        server.stop()


def wait_for(predicate, timeout: float, *workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    logs = "\n".join(f"--- {worker.name}\n{worker.log()}" for worker in workers)
    pytest.fail(f"gave up after {timeout}s; worker logs:\n{logs}")


def test_a_digest_run_survives_redis_restarting_empty_and_mails_everyone_once(
    leads, mail, throwaway_redis, celery_worker_factory
):
    inbox, env = mail
    worker = celery_worker_factory(env=env, broker_url=throwaway_redis.url)
    with app.connection_for_write(throwaway_redis.url) as broker:
        digests_send_task.apply_async(
            kwargs={"frequency": "weekly", "now": SEND_AT.isoformat()}, connection=broker
        )
    wait_for(lambda: len(inbox.recipients) >= 3, 60, worker)
    throwaway_redis.restart(down_for=1.0)

    def finished():
        statuses = list(Delivery.objects.values_list("status", flat=True))
        return len(statuses) == LEADS and set(statuses) == {Delivery.Status.SENT}

    wait_for(finished, 60, worker)
    assert Counter(inbox.recipients) == Counter(leads)  # everyone once


def test_a_digest_run_cut_by_postgresql_restarting_mails_nobody_twice_and_the_rest_once(
    leads, mail, throwaway_postgres, celery_worker_factory
):
    inbox, env = mail
    throwaway_postgres.copy_test_database(connection.settings_dict)  # the world and the leads
    worker = celery_worker_factory(env=env, database_url=throwaway_postgres.url)

    def deliveries() -> dict[str, str] | None:
        rows = throwaway_postgres.query("SELECT email, status FROM digests_delivery")
        return None if rows is None else dict(rows)

    digests_send_task.delay(frequency="weekly", now=SEND_AT.isoformat())
    wait_for(lambda: len(inbox.recipients) >= 3, 60, worker)
    throwaway_postgres.restart(down_for=1.0)
    # The run stopped on the lost database; its task retries later (in a minute: backoff).
    wait_for(lambda: "Retry in" in worker.log(), 60, worker)
    time.sleep(0.5)  # what the SMTP thread had in hand is sent by now
    left = wait_for(deliveries, 30, worker)
    claimed_left = {email for email, status in left.items() if status == Delivery.Status.SENDING}
    received_before = len(inbox.recipients)

    throwaway_postgres.query(
        "UPDATE digests_delivery SET claimed_at = %s WHERE status = %s RETURNING id",
        (timezone.now() - DELIVERY_STALE_AFTER - timedelta(seconds=1), Delivery.Status.SENDING),
    )
    deliveries_reap_task.delay()

    def settled():
        now = deliveries()
        return now if now and len(now) == LEADS and "sending" not in now.values() else None

    by_email = wait_for(settled, 60, worker)
    assert set(by_email) == leads  # one delivery each, none lost
    assert max(Counter(inbox.recipients).values()) == 1  # nobody mailed twice
    sent = {email for email, status in by_email.items() if status == Delivery.Status.SENT}
    unknown = {email for email, status in by_email.items() if status == Delivery.Status.UNKNOWN}
    assert sent | unknown == leads
    assert sent <= set(inbox.recipients)
    assert unknown == claimed_left
    # The run sent again mailed, once each, everyone the cut one had not claimed.
    assert len(inbox.recipients) - received_before == LEADS - len(left)
