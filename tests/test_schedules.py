"""The default schedules, all created in costsite/schedules.py after every migrate."""

import pytest
from django.core.management import call_command
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from costsite.schedules import DEFAULT_SCHEDULES, schedules_ensure

pytestmark = pytest.mark.django_db


def ensure() -> None:
    schedules_ensure(
        periodic_task_model=PeriodicTask,
        interval_model=IntervalSchedule,
        crontab_model=CrontabSchedule,
    )


def test_migrate_created_every_default_schedule_and_no_other():
    assert sorted(PeriodicTask.objects.values_list("name", "task")) == [
        (
            "billing: hand back stuck import and re-attribution runs",
            "apps.billing.tasks.billing_runs_reap_task",
        ),
        ("billing: poll due sources", "apps.billing.tasks.billing_sources_poll_due"),
        ("digests: check alerts daily", "apps.digests.tasks.alerts_check_task"),
        ("digests: send daily digests", "apps.digests.tasks.digests_send_task"),
        ("digests: send weekly digests", "apps.digests.tasks.digests_send_task"),
        ("digests: settle deliveries left sending", "apps.digests.tasks.deliveries_reap_task"),
        ("gpu: poll due metric sources", "apps.gpu.tasks.metric_sources_poll_due"),
        ("insights: recompute findings nightly", "apps.insights.tasks.findings_recompute_task"),
        ("insights: run stuck recomputes again", "apps.insights.tasks.recompute_runs_reap_task"),
        ("trackers: poll due MLflow sources", "apps.trackers.tasks.tracker_sources_poll_due"),
    ]
    assert len(DEFAULT_SCHEDULES) == 10


def test_the_nightly_recompute_runs_at_half_past_three_utc():
    nightly = PeriodicTask.objects.get(name="insights: recompute findings nightly")

    crontab = nightly.crontab
    assert (crontab.minute, crontab.hour, str(crontab.timezone)) == ("30", "3", "UTC")
    assert (crontab.day_of_week, crontab.day_of_month, crontab.month_of_year) == ("*", "*", "*")
    assert nightly.interval is None


def test_weekly_digests_go_out_on_monday_mornings_and_daily_ones_every_morning():
    weekly = PeriodicTask.objects.get(name="digests: send weekly digests")
    daily = PeriodicTask.objects.get(name="digests: send daily digests")

    assert (weekly.crontab.minute, weekly.crontab.hour, weekly.crontab.day_of_week) == (
        "0",
        "8",
        "1",
    )
    assert (daily.crontab.minute, daily.crontab.hour, daily.crontab.day_of_week) == ("0", "8", "*")
    assert (weekly.kwargs, daily.kwargs) == ('{"frequency": "weekly"}', '{"frequency": "daily"}')


def test_digest_schedules_take_the_organisations_time_zone():
    PeriodicTask.objects.filter(name__startswith="digests:").delete()
    schedules_ensure(
        periodic_task_model=PeriodicTask,
        interval_model=IntervalSchedule,
        crontab_model=CrontabSchedule,
        time_zone="Europe/Berlin",
    )

    assert str(PeriodicTask.objects.get(name="digests: send weekly digests").crontab.timezone) == (
        "Europe/Berlin"
    )
    assert str(PeriodicTask.objects.get(name="digests: check alerts daily").crontab.timezone) == (
        "UTC"
    )


def test_ensuring_again_never_changes_a_schedule_an_operator_edited():
    tick = PeriodicTask.objects.get(name="gpu: poll due metric sources")
    tick.enabled = False
    tick.interval = IntervalSchedule.objects.create(every=120, period="seconds")
    tick.save()

    ensure()
    call_command("migrate", verbosity=0)

    tick.refresh_from_db()
    assert (tick.enabled, tick.interval.every) == (False, 120)
    assert PeriodicTask.objects.count() == len(DEFAULT_SCHEDULES) == 10


def test_a_deleted_default_comes_back_on_the_next_migrate():
    PeriodicTask.objects.filter(name="billing: poll due sources").delete()

    call_command("migrate", verbosity=0)

    tick = PeriodicTask.objects.get(name="billing: poll due sources")
    assert (tick.interval.every, tick.interval.period, tick.enabled) == (60, "seconds", True)
