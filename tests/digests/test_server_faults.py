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
from django.db import DatabaseError, connection, connections
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

ALIAS = "throwaway"


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


def wait_for(predicate, timeout: float, *workers, alias: str = "default"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except DatabaseError:  # the server is restarting: reconnect on the next try
            connections[alias].close()
            value = None
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
    connections.settings[ALIAS] = throwaway_postgres.settings_dict(connection.settings_dict)
    deliveries = Delivery.objects.using(ALIAS)
    try:
        worker = celery_worker_factory(env=env, database_url=throwaway_postgres.url)
        digests_send_task.delay(frequency="weekly", now=SEND_AT.isoformat())
        wait_for(lambda: len(inbox.recipients) >= 3, 60, worker)
        throwaway_postgres.restart(down_for=1.0)
        # The run stopped on the lost database; its task retries later (a minute: backoff).
        wait_for(lambda: "Retry in" in worker.log(), 60, worker)
        time.sleep(0.5)  # what the SMTP thread had in hand is sent by now
        claimed_left = wait_for(
            lambda: (
                set(
                    deliveries.filter(status=Delivery.Status.SENDING).values_list(
                        "email", flat=True
                    )
                )
                or {"none"}
            ),
            30,
            worker,
            alias=ALIAS,
        )
        received_before = len(inbox.recipients)
        reached_before = deliveries.count()

        deliveries.filter(status=Delivery.Status.SENDING).update(
            claimed_at=timezone.now() - DELIVERY_STALE_AFTER - timedelta(seconds=1)
        )
        deliveries_reap_task.delay()

        def settled():
            statuses = list(deliveries.values_list("status", flat=True))
            return len(statuses) == LEADS and Delivery.Status.SENDING not in statuses

        wait_for(settled, 60, worker, alias=ALIAS)
        by_email = {d.email: d.status for d in deliveries}
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]

    assert set(by_email) == leads  # one delivery each, none lost
    assert max(Counter(inbox.recipients).values()) == 1  # nobody mailed twice
    sent = {email for email, status in by_email.items() if status == Delivery.Status.SENT}
    unknown = {email for email, status in by_email.items() if status == Delivery.Status.UNKNOWN}
    assert sent | unknown == leads
    assert sent <= set(inbox.recipients)
    assert unknown == claimed_left - {"none"}
    assert len(inbox.recipients) - received_before == LEADS - reached_before
