"""Polling a folder source: new, changed and unchanged files, CUR manifests, files still being
written, a folder that is missing (marked, backed off, nothing lost), the dispatcher and re-runs.

Runs are executed here with `import_run_execute`, as a worker would (tests run Celery lazily)."""

import os
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import redis
from celery.exceptions import Retry
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.billing import services_sources, tasks
from apps.billing.models import (
    BillingSource,
    DailyCost,
    Delivery,
    ImportRun,
    SourceObject,
    SourcePoll,
)
from apps.billing.services import import_run_execute
from apps.billing.sources import SETTLE_SECONDS, SourceUnavailable
from costsite.celery import app as celery_app

from .conftest import focus_line, write_focus
from .formats.cur import BILLED, EFFECTIVE, cur_lines, write_manifest

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

NOW = datetime(2025, 2, 3, 9, 0, tzinfo=UTC)


def settle(path: Path, *, minutes_ago: int = 10, now: datetime = NOW) -> Path:
    """Give the file a modification time in the past: it is no longer being written."""
    moment = (now - timedelta(minutes=minutes_ago)).timestamp()
    os.utime(path, (moment, moment))
    return path


def january(path: Path, *amounts: str, account: str = "111111111111") -> Path:
    """A FOCUS file of January 2025 with one line per amount (spend = billed)."""
    lines = [
        focus_line(
            BillingAccountId=account,
            BilledCost=amount,
            EffectiveCost=amount,
            ResourceId=f"i-{number}",
        )
        for number, amount in enumerate(amounts)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    return settle(write_focus(path, lines))


def february(path: Path, *amounts: str) -> Path:
    lines = [
        focus_line(
            BillingPeriodStart="2025-02-01T00:00:00Z",
            BillingPeriodEnd="2025-03-01T00:00:00Z",
            ChargePeriodStart="2025-02-02T10:00:00Z",
            ChargePeriodEnd="2025-02-02T11:00:00Z",
            BilledCost=amount,
            EffectiveCost=amount,
        )
        for amount in amounts
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    return settle(write_focus(path, lines))


def folder_source(path: Path, **values) -> BillingSource:
    return services_sources.billing_source_create(
        name=values.pop("name", "exports"), kind=BillingSource.Kind.FOLDER, path=str(path), **values
    )


def execute(poll: SourcePoll) -> list[ImportRun]:
    """Run the poll's imports, oldest first, as the worker would."""
    return [import_run_execute(import_run=run) for run in poll.import_runs.order_by("pk")]


def counts(poll: SourcePoll) -> tuple:
    return (
        poll.status,
        poll.files_found,
        poll.files_new,
        poll.files_changed,
        poll.files_unchanged,
        poll.runs_started,
    )


def current_spend() -> dict:
    totals = {}
    for delivery in Delivery.objects.filter(status=Delivery.Status.CURRENT):
        totals[(delivery.billing_account_id, delivery.billing_period_start.date())] = (
            delivery.effective_cost
        )
    return totals


def rollup_spend() -> Decimal:
    return DailyCost.objects.aggregate(total=Sum("effective_cost"))["total"]


@pytest.fixture
def drop(tmp_path) -> Path:
    folder = tmp_path / "drop"
    folder.mkdir()
    return folder


def test_a_new_file_is_imported_once_and_unchanged_on_the_next_poll(acme, drop):
    january(drop / "focus" / "2025-01.csv", "1.50", "2.25")
    source = folder_source(drop)

    poll = services_sources.billing_source_poll(source=source, now=NOW)
    [run] = execute(poll)
    again = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))

    assert counts(poll) == ("succeeded", 1, 1, 0, 0, 1)
    assert (run.status, run.origin, run.source, run.poll) == ("succeeded", "source", source, poll)
    assert run.paths == [str(drop / "focus" / "2025-01.csv")]
    assert run.display_name == "focus/2025-01.csv"
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "3.75"}}
    assert counts(again) == ("succeeded", 1, 0, 0, 1, 0)
    assert ImportRun.objects.count() == 1
    seen = SourceObject.objects.get()
    assert (seen.key, seen.size, seen.import_run) == (
        "focus/2025-01.csv",
        (drop / "focus" / "2025-01.csv").stat().st_size,
        run,
    )
    source.refresh_from_db()
    assert source.health == BillingSource.Health.HEALTHY
    assert source.last_success_at == NOW + timedelta(hours=1)
    assert source.next_poll_at == NOW + timedelta(hours=2)


def test_a_changed_file_is_imported_once_more_and_replaces_its_delivery(acme, drop):
    path = january(drop / "2025-01.csv", "1.50", "2.25")
    source = folder_source(drop)
    execute(services_sources.billing_source_poll(source=source, now=NOW))
    first = Delivery.objects.get()

    january(path, "1.50", "2.25", "10.000001")  # the cloud restated the month
    settle(path, minutes_ago=5)
    changed = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))
    [run] = execute(changed)
    after = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=2))

    assert counts(changed) == ("succeeded", 1, 0, 1, 0, 1)
    assert run.status == ImportRun.Status.SUCCEEDED
    assert run.results[0]["replaced"] == first.pk
    first.refresh_from_db()
    assert first.status == Delivery.Status.REPLACED
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "13.750001"}}
    assert rollup_spend() == Decimal("13.750001")
    assert counts(after) == ("succeeded", 1, 0, 0, 1, 0)
    assert ImportRun.objects.count() == 2


def test_a_file_touched_without_new_content_runs_once_and_the_importer_finds_it_unchanged(
    acme, drop
):
    path = january(drop / "2025-01.csv", "4.00")
    source = folder_source(drop)
    execute(services_sources.billing_source_poll(source=source, now=NOW))

    settle(path, minutes_ago=3)  # copied again by a sync tool: new mtime, same bytes
    poll = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))
    [run] = execute(poll)

    assert counts(poll) == ("succeeded", 1, 0, 1, 0, 1)
    assert run.status == ImportRun.Status.UNCHANGED
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "4.00"}}
    assert rollup_spend() == Decimal("4.00")


def test_a_cur_manifest_and_the_parts_it_lists_are_one_run(acme, drop):
    lines = cur_lines()
    manifest = write_manifest(drop, [lines[:6], lines[6:]])
    for path in drop.rglob("*"):
        if path.is_file():
            settle(path)
    january(drop / "focus.csv", "2.00", account="999999999999")
    source = folder_source(drop)

    poll = services_sources.billing_source_poll(source=source, now=NOW)
    runs = execute(poll)

    assert counts(poll) == ("succeeded", 4, 4, 0, 0, 2)
    assert sorted(run.paths[0] for run in runs) == sorted([str(manifest), str(drop / "focus.csv")])
    cur = next(run for run in runs if run.paths == [str(manifest)])
    assert cur.status == ImportRun.Status.SUCCEEDED, cur.error
    assert (cur.format, cur.billed_cost, cur.effective_cost) == (
        "aws-cur",
        {"USD": str(BILLED)},
        {"USD": str(EFFECTIVE)},
    )
    assert SourceObject.objects.filter(import_run=cur).count() == 3
    # A part rewritten later brings the whole delivery back, once.
    part = next(drop.rglob("cur-00002.csv.gz"))
    settle(part, minutes_ago=2)
    again = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))
    assert counts(again) == ("succeeded", 4, 0, 1, 3, 1)
    assert again.import_runs.get().paths == [str(manifest)]


def test_files_being_written_hidden_or_partial_are_left_for_a_later_poll(acme, drop):
    january(drop / "done.csv", "1.00")
    january(drop / ".hidden.csv", "2.00")
    january(drop / "upload.csv.part", "3.00")
    january(drop / "_temporary" / "x.csv", "4.00")
    (drop / "README.txt").write_text("Exports land here.\n")
    fresh = january(drop / "arriving.csv", "5.00", account="333333333333")
    settle(fresh, minutes_ago=0)  # still being written at NOW
    source = folder_source(drop)

    poll = services_sources.billing_source_poll(source=source, now=NOW)
    later = services_sources.billing_source_poll(
        source=source, now=NOW + timedelta(seconds=SETTLE_SECONDS + 1)
    )

    assert counts(poll) == ("succeeded", 1, 1, 0, 0, 1)
    assert poll.import_runs.get().display_name == "done.csv"
    assert counts(later) == ("succeeded", 2, 1, 0, 1, 1)
    assert later.import_runs.get().display_name == "arriving.csv"


def test_a_missing_folder_marks_the_source_unhealthy_backs_off_and_nothing_is_lost(acme, tmp_path):
    folder = tmp_path / "mount"
    source = folder_source(folder)

    with pytest.raises(SourceUnavailable):
        services_sources.billing_source_poll(source=source, now=NOW)
    with pytest.raises(SourceUnavailable):
        services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))

    error = f"The folder {folder} does not exist (or is not a folder)."
    failed = SourcePoll.objects.order_by("pk")
    assert [(p.status, p.error, p.runs_started) for p in failed] == [("failed", error, 0)] * 2
    source.refresh_from_db()
    assert (source.health, source.last_error, source.consecutive_failures) == (
        BillingSource.Health.UNHEALTHY,
        error,
        2,
    )
    # Backed off: two minutes after the second failure, then the interval.
    assert source.next_poll_at == NOW + timedelta(hours=1, minutes=2 + 60)

    # The mount comes back with what the cloud delivered meanwhile.
    january(folder / "2025-01.csv", "7.25")
    poll = services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=3))
    execute(poll)

    assert counts(poll) == ("succeeded", 1, 1, 0, 0, 1)
    source.refresh_from_db()
    assert (source.health, source.last_error, source.consecutive_failures) == ("healthy", "", 0)
    assert current_spend() == {("111111111111", date(2025, 1, 1)): {"USD": "7.25"}}


def test_retries_back_off_doubling_up_to_an_hour():
    assert [services_sources.retry_delay(failures=n) for n in (1, 2, 3, 6, 7, 10)] == [
        60,
        120,
        240,
        1920,
        3600,
        3600,
    ]


@pytest.fixture
def broker():
    """The Redis list of the imports queue (polls are routed there), emptied before and after."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("imports")
    yield client
    client.delete("imports")


def test_the_poll_task_retries_a_down_source_after_a_minute(acme, tmp_path, broker):
    source = folder_source(tmp_path / "gone")

    # Run the task as a worker runs it, so that its retry goes to the broker.
    task = tasks.billing_source_poll_task
    task.push_request(
        id="poll-1", args=[source.pk], kwargs={}, retries=0, called_directly=False, is_eager=False
    )
    try:
        with pytest.raises(Retry) as retry:
            task.run(source.pk)
    finally:
        task.pop_request()

    assert retry.value.when == 60
    assert broker.llen("imports") == 1
    source.refresh_from_db()
    assert source.consecutive_failures == 1


def test_due_sources_are_claimed_once_and_paused_ones_not_at_all(acme, drop):
    due = folder_source(drop, name="due")
    later = folder_source(drop, name="later")
    paused = folder_source(drop, name="paused", is_paused=True)
    BillingSource.objects.filter(pk__in=[due.pk, paused.pk]).update(next_poll_at=NOW)
    BillingSource.objects.filter(pk=later.pk).update(next_poll_at=NOW + timedelta(minutes=5))

    assert services_sources.billing_sources_claim_due(now=NOW + timedelta(seconds=1)) == [due.pk]
    assert services_sources.billing_sources_claim_due(now=NOW + timedelta(seconds=1)) == []
    due.refresh_from_db()
    assert due.next_poll_at == NOW + timedelta(seconds=1, minutes=60)


def test_the_beat_tick_polls_due_sources_and_skips_paused_ones(acme, drop):
    january(drop / "2025-01.csv", "1.00")
    live = folder_source(drop, name="live")
    paused = folder_source(drop, name="paused")
    BillingSource.objects.filter(pk=paused.pk).update(is_paused=True)
    BillingSource.objects.update(next_poll_at=timezone.now() - timedelta(minutes=1))
    celery_app.conf.task_always_eager = True
    try:
        polled = tasks.billing_sources_poll_due.apply().get()
        # A poll of a source paused since it was claimed does nothing...
        skipped = tasks.billing_source_poll_task.apply(args=[paused.pk]).get()
        # ...but an operator's "Poll now" goes ahead.
        manual = tasks.billing_source_poll_task.apply(args=[paused.pk], kwargs={"manual": True})
    finally:
        celery_app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER

    assert polled == [live.pk]
    assert skipped == 0
    assert manual.get() == 1
    assert list(SourcePoll.objects.values_list("source__name", "runs_started")) == [
        ("paused", 1),
        ("live", 1),
    ]


def test_the_default_schedule_ticks_every_minute(db):
    tick = PeriodicTask.objects.get(name="billing: poll due sources")

    assert tick.task == "apps.billing.tasks.billing_sources_poll_due"
    assert (tick.interval.every, tick.interval.period, tick.enabled) == (60, "seconds", True)


def test_a_rerun_imports_again_only_the_files_of_the_periods_asked(acme, drop):
    january(drop / "jan.csv", "1.00")
    february(drop / "feb.csv", "2.00")
    broken = drop / "exports-2025-02-extra.csv"
    broken.write_text("not,a,bill\n1,2,3\n")
    settle(broken)
    source = folder_source(drop)
    first = execute(services_sources.billing_source_poll(source=source, now=NOW))
    assert sorted(run.status for run in first) == ["failed", "succeeded", "succeeded"]

    rerun = services_sources.billing_source_poll(
        source=source,
        now=NOW + timedelta(minutes=5),
        period_start=date(2025, 2, 1),
        period_end=date(2025, 3, 1),
    )
    runs = execute(rerun)

    assert (rerun.period_start, rerun.period_end) == (date(2025, 2, 1), date(2025, 3, 1))
    # feb.csv by the period it loaded; the broken file, which loaded nothing, by its name.
    assert sorted(run.display_name for run in runs) == ["exports-2025-02-extra.csv", "feb.csv"]
    assert counts(rerun) == ("succeeded", 2, 0, 0, 2, 2)
    feb = next(run for run in runs if run.display_name == "feb.csv")
    assert feb.status == ImportRun.Status.UNCHANGED
    assert current_spend() == {
        ("111111111111", date(2025, 1, 1)): {"USD": "1.00"},
        ("111111111111", date(2025, 2, 1)): {"USD": "2.00"},
    }
    source.refresh_from_db()
    # A re-run does not move the schedule.
    assert source.next_poll_at == NOW + timedelta(hours=1)


def test_the_period_of_a_key_is_read_from_the_usual_layouts():
    key_period = services_sources.key_period
    assert key_period("cur/report/20250101-20250201/cur-Manifest.json") == date(2025, 1, 1)
    assert key_period("athena/year=2025/month=3/part-0.parquet") == date(2025, 3, 1)
    assert key_period("data/BILLING_PERIOD=2025-11/x-00001.csv.gz") == date(2025, 11, 1)
    assert key_period("focus-202412.csv") == date(2024, 12, 1)
    assert key_period("focus.csv") is None
