"""Fault test: a real Celery worker SIGKILLed mid-digest, while it mails through a real (slow)
SMTP server on loopback. Deliveries are claimed before they are sent, so after the reaper settles
what the dead worker left `sending` and its run is sent again on a second worker, every
subscriber has one delivery, nobody got two mails, and every mail the server did not receive is
one the worker never recorded as sent."""

import asyncio
import os
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from apps.accounts.models import Membership
from apps.digests.models import Delivery
from apps.digests.services import (
    CLAIM_BATCH,
    DELIVERY_STALE_AFTER,
    SEND_AHEAD,
    UNKNOWN_AFTER_STOP,
    deliveries_reap,
)
from apps.digests.tasks import deliveries_reap_task, digests_send_task
from tests.factories import MembershipFactory, UserFactory

from .conftest import SEND_AT
from .test_smtp import free_port

pytestmark = [
    pytest.mark.worker,
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]

LEADS = 30


class SlowInbox:
    """Takes a fifth of a second per message, so that the worker is killed between two."""

    def __init__(self):
        self.recipients: list[str] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        await asyncio.sleep(0.2)
        self.recipients.extend(envelope.rcpt_tos)
        return "250 Message accepted for delivery"


def wait_for(predicate, timeout: float, *workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    logs = "\n".join(f"--- {worker.name}\n{worker.log()}" for worker in workers)
    pytest.fail(f"gave up after {timeout}s; worker logs:\n{logs}")


def test_a_digest_run_whose_worker_is_killed_mails_nobody_twice_and_the_rest_once(
    world, team, celery_worker_factory
):
    emails = set()
    for number in range(LEADS):
        user = UserFactory(username=f"lead-{number:02}", email=f"lead-{number:02}@example.com")
        MembershipFactory(team=team, user=user, role=Membership.Role.LEAD)
        emails.add(user.email)
    inbox = SlowInbox()
    port = free_port()
    server = Controller(inbox, hostname="127.0.0.1", port=port)
    server.start()
    mail = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(port),
    }
    try:
        first = celery_worker_factory(env=mail)
        digests_send_task.delay(frequency="weekly", now=SEND_AT.isoformat())
        wait_for(lambda: len(inbox.recipients) >= 3, 60, first)
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=10)
        time.sleep(0.5)  # the message on the wire, if any, is received or dropped by now

        left = Counter(Delivery.objects.values_list("status", flat=True))
        claimed_left = set(
            Delivery.objects.filter(status=Delivery.Status.SENDING).values_list("email", flat=True)
        )
        assert left[Delivery.Status.SENDING] > 0, left  # claimed, and never marked
        assert sum(left.values()) < LEADS  # it did not get to everyone
        assert deliveries_reap() == []  # claimed moments ago: it may be alive

        Delivery.objects.filter(status=Delivery.Status.SENDING).update(
            claimed_at=timezone.now() - DELIVERY_STALE_AFTER - timedelta(seconds=1)
        )
        received_before = len(inbox.recipients)
        second = celery_worker_factory(env=mail)
        deliveries_reap_task.delay()

        def settled():
            statuses = list(Delivery.objects.values_list("status", flat=True))
            return len(statuses) == LEADS and Delivery.Status.SENDING not in statuses

        wait_for(settled, 60, first, second)
    finally:
        server.stop()

    deliveries = {d.email: d for d in Delivery.objects.all()}
    assert set(deliveries) == emails  # one delivery each, none lost
    assert max(Counter(inbox.recipients).values()) == 1  # nobody mailed twice
    sent = {email for email, d in deliveries.items() if d.status == Delivery.Status.SENT}
    unknown = {email for email, d in deliveries.items() if d.status == Delivery.Status.UNKNOWN}
    assert sent | unknown == emails
    assert sent <= set(inbox.recipients)  # every "sent" arrived
    # What may or may not have gone out is what the dead worker had claimed: a person decides.
    assert unknown == claimed_left
    # At most a claimed batch and the messages handed to the SMTP thread ahead of their marks.
    assert 0 < len(unknown) <= CLAIM_BATCH + SEND_AHEAD
    assert all(deliveries[email].error == UNKNOWN_AFTER_STOP for email in unknown)
    # The run sent again mailed the subscribers the dead one had not reached.
    assert len(inbox.recipients) - received_before == LEADS - sum(left.values())
