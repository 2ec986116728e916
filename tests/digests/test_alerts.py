"""Alerts: a month-end forecast over budget, a day's spend above a multiple of the mean of the
days before. One email to the project's leads when it first happens, none until it clears."""

from datetime import UTC, date, datetime
from decimal import Decimal
from unittest import mock

import pytest
from django.core import mail
from django.test import Client

from apps.billing.loader import rollups_rebuild
from apps.digests.models import Alert, DigestSettings
from apps.digests.services import alerts_check
from apps.digests.tasks import on_spend_data_changed
from apps.projects.ports import spend_data_changed
from tests.insights.conftest import line

pytestmark = pytest.mark.django_db
NOW = datetime(2025, 3, 11, 6, tzinfo=UTC)


def test_a_forecast_over_budget_mails_the_leads_once_until_it_clears(world, project, lead, member):
    # 10 days billed, 126.00 so far: the run rate makes 126.00 × 31 / 10 = 390.60 by month end.
    project.monthly_budget = Decimal("300.00")
    project.save()

    first = alerts_check(now=NOW)
    again = alerts_check(now=NOW)

    assert [(a.kind, a.amount, a.threshold) for a in first] == [
        ("forecast_over_budget", Decimal("390.60"), Decimal("300.00"))
    ]
    assert again == []
    (message,) = mail.outbox
    assert message.to == ["lena-lead@example.com"]
    assert message.subject == "Alert: Image ranking: forecast over budget"
    assert message.body.startswith(
        "Image ranking's month-end forecast is 390.60 USD, over its budget of 300.00 USD.\n"
    )
    assert "http://127.0.0.1:8000/projects/image-ranking/" in message.body

    project.monthly_budget = Decimal("400.00")
    project.save()
    assert alerts_check(now=NOW) == []
    assert Alert.objects.get().cleared_at == NOW

    project.monthly_budget = Decimal("300.00")
    project.save()
    assert len(alerts_check(now=NOW)) == 1
    assert len(mail.outbox) == 2
    assert Alert.objects.filter(cleared_at__isnull=True).count() == 1


def test_a_days_spend_over_twice_the_mean_of_the_28_days_before_is_a_spike(world, project, lead):
    for day in range(1, 10):  # 1–9 March: 5.00 a day, 45.00 in the 28 days before the 10th
        line(
            world["delivery"],
            f"2025-03-0{day} 00:00",
            f"2025-03-0{day} 01:00",
            "5.00",
            resource="i-a",
            project=project,
        )
    rollups_rebuild(delivery_id=world["delivery"].pk)

    (alert,) = alerts_check(now=NOW)

    assert (alert.kind, alert.day, alert.amount) == (
        "daily_spike",
        date(2025, 3, 10),
        Decimal("126"),
    )
    assert alert.message == (
        "Image ranking spent 126.00 USD on 2025-03-10, 78.4x the mean of the 28 days before "
        "(1.61 USD)."
    )
    assert len(mail.outbox) == 1


def test_the_spike_multiple_is_configurable(world, project, lead):
    for day in range(1, 10):
        line(
            world["delivery"],
            f"2025-03-0{day} 00:00",
            f"2025-03-0{day} 01:00",
            "5.00",
            resource="i-a",
            project=project,
        )
    rollups_rebuild(delivery_id=world["delivery"].pk)
    settings = DigestSettings.get()
    settings.spike_multiple = Decimal("100")
    settings.save()

    assert alerts_check(now=NOW) == []
    assert mail.outbox == []


def test_alerts_are_listed_on_the_project_page(world, project, lead):
    project.monthly_budget = Decimal("300.00")
    project.save()
    alerts_check(now=NOW)
    client = Client()
    client.force_login(lead)

    body = client.get("/projects/image-ranking/").content.decode()

    assert "<strong>Forecast over budget</strong> (open since 11 Mar 2025)" in body


def test_spend_data_changed_checks_the_alerts_after_the_commit(django_capture_on_commit_callbacks):
    assert on_spend_data_changed in spend_data_changed.handlers()
    with (
        mock.patch("apps.digests.tasks.alerts_check_task.delay") as delay,
        mock.patch("apps.insights.tasks.findings_recompute_task.delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        spend_data_changed.announce(start=date(2025, 3, 1), end=date(2025, 3, 2), reason="delivery")
        assert delay.call_count == 0  # only once the change commits
    assert delay.call_count == 1
