"""The insights tests' bill worked out by hand (tests/insights/conftest.py), with its rollups and
findings, seen by a weekly digest sent on Monday 17 March 2025 (it covers 10–16 March).

The bill runs to 10 March 16:00, so the digest lags: spend is compared over 10 March only.
For the lead of Vision (project image-ranking, and unattributed spend):
  spend 10 March: i-a 3 × 4.00 + CPU 100.00 + i-b 9.00 + i-c 5.00 = 126.00 (nothing the day before)
  wasted, counted once: idle i-a 5.00 + i-b 3.25 + i-u 10.00 = 18.25 (unattributed 35.00 beside)
  unattributed spend: i-u 20.00 + S3 15.00 + EC2-Other 3.00 = 38.00 of 164.00
"""

from datetime import UTC, datetime

import pytest
import time_machine
from django.core.mail.backends.locmem import EmailBackend

from apps.billing.loader import rollups_rebuild
from apps.digests.models import Subscription
from apps.insights.services import findings_recompute
from tests.insights.conftest import build_bill, make_delivery

SEND_AT = datetime(2025, 3, 17, 8, tzinfo=UTC)  # a Monday
RECOMPUTED_AT = datetime(2025, 3, 11, 9, tzinfo=UTC)


@pytest.fixture
def organization(db):
    from apps.accounts.models import Organization

    org = Organization.get()
    org.currency = "USD"
    org.save()
    return org


@pytest.fixture
def world(organization, project):
    delivery = make_delivery()
    bill = build_bill(delivery, project)
    rollups_rebuild(delivery_id=delivery.pk)
    with time_machine.travel(RECOMPUTED_AT, tick=False):
        findings_recompute()
    return {"delivery": delivery, **bill}


@pytest.fixture
def subscribed_lead(lead):
    Subscription.objects.create(user=lead)
    return lead


class RefusingBackend(EmailBackend):
    """locmem, but the server refuses some addresses (550) and drops the line on others."""

    refused: set[str] = set()
    dropped: set[str] = set()

    def send_messages(self, messages):
        import smtplib

        for message in messages:
            (to,) = message.to
            if to in self.refused:
                raise smtplib.SMTPRecipientsRefused({to: (550, b"No such user")})
            if to in self.dropped:
                raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        return super().send_messages(messages)
