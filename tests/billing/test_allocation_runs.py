"""A re-attribution is a tracked run: queued when a change commits, claimed once, its progress
readable by another connection while a delivery's transaction is open, and ended succeeded or
failed with the error."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import OperationalError
from django.utils import timezone

from apps.billing import reattribution, services
from apps.billing.models import AttributionRun
from apps.billing.services import attribution_run_execute, attribution_schedule
from apps.billing.tasks import attribution_refresh_task
from apps.projects.models import TagKeyAlias

from .conftest import focus_line, run_import, write_focus


@pytest.fixture
def two_deliveries(acme, tmp_path):
    """Two billing accounts, one delivery each, each with one line tagged team-project=vision."""
    lines = [
        focus_line(
            BillingAccountId=account,
            ResourceId=f"i-{account[:3]}",
            Tags='{"team-project": "vision"}',
            EffectiveCost=cost,
            BilledCost=cost,
        )
        for account, cost in (("111111111111", "6.00"), ("333333333333", "1.25"))
    ]
    run = run_import(write_focus(tmp_path / "january.csv", lines))
    assert run.status == "succeeded", run.error
    return acme


@pytest.mark.django_db(databases=["default", "progress"])
def test_scheduling_queues_a_run_and_enqueues_its_id_after_the_commit(
    two_deliveries, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(attribution_refresh_task, "delay", lambda *args: sent.append(args))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = attribution_schedule(reason="Tag key alias added", created_by=None)
        assert sent == []

    assert len(callbacks) == 1
    assert sent == [(run.pk,)]
    assert (run.status, run.reason, run.resource_ids) == ("queued", "Tag key alias added", None)
    assert attribution_schedule(resource_ids=[" i-1 ", "i-1", ""]).resource_ids == ["i-1"]


@pytest.mark.django_db(databases=["default", "progress"])
def test_a_run_records_its_progress_and_what_moved(two_deliveries):
    TagKeyAlias.objects.create(dimension="project", key="team-project")
    run = attribution_schedule(reason="alias")

    run = attribution_run_execute(attribution_run=run)

    assert run.status == AttributionRun.Status.SUCCEEDED
    assert (run.deliveries_total, run.deliveries_done, run.lines_changed) == (2, 2, 2)
    assert run.started_at is not None and run.finished_at >= run.started_at
    assert run.error == ""
    assert run.moved == [
        {
            "direction": "from",
            "project_id": None,
            "experiment_id": None,
            "deployment_id": None,
            "currency": "USD",
            "amount": "7.25",
            "recent": "0.00",
            "lines": 2,
        },
        {
            "direction": "to",
            "project_id": two_deliveries.vision.pk,
            "experiment_id": None,
            "deployment_id": None,
            "currency": "USD",
            "amount": "7.25",
            "recent": "0.00",
            "lines": 2,
        },
    ]


@pytest.mark.django_db(databases=["default", "progress"])
def test_a_claimed_run_is_not_run_twice(two_deliveries, monkeypatch):
    run = attribution_run_execute(attribution_run=attribution_schedule())
    assert run.status == "succeeded"
    monkeypatch.setattr(
        services, "attribution_refresh", lambda **kwargs: pytest.fail("ran a second time")
    )

    assert attribution_refresh_task(run.pk) == "succeeded"
    assert attribution_refresh_task(run.pk + 1000) == "missing"


@pytest.mark.django_db(databases=["default", "progress"])
def test_a_run_whose_worker_died_is_claimed_again_once_its_heartbeat_is_stale(two_deliveries):
    TagKeyAlias.objects.create(dimension="project", key="team-project")
    run = attribution_schedule(reason="alias")
    beat = timezone.now() - timedelta(minutes=9)
    AttributionRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=beat)

    # Still beating nine minutes ago: another process may be on it.
    assert attribution_run_execute(attribution_run=run).status == "running"
    assert run.lines_changed == 0

    AttributionRun.objects.filter(pk=run.pk).update(heartbeat_at=beat - timedelta(minutes=2))
    run = attribution_run_execute(attribution_run=run)
    assert (run.status, run.deliveries_done, run.lines_changed) == ("succeeded", 2, 2)
    assert run.heartbeat_at > beat


@pytest.mark.django_db(databases=["default", "progress"])
def test_a_failing_run_ends_failed_with_the_error(two_deliveries, monkeypatch):
    calls = []

    def fail_on_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("no space left on device")
        return 0

    monkeypatch.setattr(services, "_refresh_delivery", fail_on_second)

    run = attribution_run_execute(attribution_run=attribution_schedule())

    assert run.status == AttributionRun.Status.FAILED
    assert run.error == (
        "Internal error (ValueError: no space left on device). The deliveries done (1 of 2) are "
        "re-attributed; the others are as they were."
    )
    assert run.finished_at is not None


@pytest.mark.django_db(databases=["default", "progress"])
def test_a_lost_database_hands_the_run_back_for_the_retry(two_deliveries, monkeypatch):
    def lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "_refresh_delivery", lost)
    run = attribution_schedule()

    with pytest.raises(OperationalError):
        attribution_run_execute(attribution_run=run)

    run.refresh_from_db()
    assert run.status == AttributionRun.Status.QUEUED


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_progress_is_visible_to_another_connection_while_a_delivery_is_open(
    two_deliveries, monkeypatch
):
    """As in a worker: no transaction around the run; the page reads through another one."""
    TagKeyAlias.objects.create(dimension="project", key="team-project")
    run = attribution_schedule()
    seen = []
    real = reattribution._reattribute

    def watching(*args, **kwargs):
        changed = real(*args, **kwargs)
        # The delivery's transaction is open here; the progress connection reads committed rows.
        row = AttributionRun.objects.using("progress").get(pk=run.pk)
        seen.append((row.status, row.deliveries_total, row.deliveries_done))
        return changed

    monkeypatch.setattr(reattribution, "_reattribute", watching)
    monkeypatch.setattr(reattribution, "PROGRESS_EVERY_SECONDS", 0)

    run = attribution_run_execute(attribution_run=run)

    assert seen == [("running", 2, 0), ("running", 2, 1)]
    assert (run.status, run.deliveries_done, run.lines_changed) == ("succeeded", 2, 2)
    assert run.moved[0]["amount"] == str(Decimal("7.25"))
