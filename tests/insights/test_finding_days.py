"""The finding-hours' day rollup (FindingDay, FindingSharedHour): what the pages read on
PostgreSQL gives, for any set of findings and any period of whole days, exactly what the hours
give, counted once hour by hour (the Python reference, `_counted_once`)."""

import itertools
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest
import time_machine
from django.db import connection
from django.db.models import Sum

from apps.insights.days import REBUILD_LOCK, day_rollup_rebuild, days_forget, days_seen
from apps.insights.models import (
    Finding,
    FindingDay,
    FindingHour,
    FindingShareDay,
    FindingSharedHour,
    FindingShareGroup,
    FindingShareMember,
    Kind,
)
from apps.insights.selectors import (
    _counted_once,
    waste_totals,
    wasted_counted_once,
    wasted_in_period,
)
from apps.insights.services import HoursChanged, findings_recompute

from .conftest import line

pytestmark = pytest.mark.django_db

DAY = date(2025, 3, 10)


def hour(day_offset: int, at: int) -> datetime:
    return datetime.combine(DAY + timedelta(days=day_offset), datetime.min.time(), UTC).replace(
        hour=at
    )


def finding(kind: str, subject: str) -> Finding:
    return Finding.objects.create(kind=kind, subject_key=subject, resource_id=subject, reason="x")


def hours(owner: Finding, *rows: tuple) -> None:
    """rows: (line key, day offset, hour, currency, wasted, spend)."""
    FindingHour.objects.bulk_create(
        FindingHour(
            finding=owner,
            line_key=line_key,
            hour=hour(offset, at),
            currency=currency,
            wasted=Decimal(wasted),
            spend=Decimal(spend),
        )
        for line_key, offset, at, currency, wasted, spend in rows
    )


@pytest.fixture
def overlapping():
    """Four waste findings and an unattributed one over three days, sharing some line-hours:
    two kinds on i-a's 10:00 of day 0 (4.00 and 3.00 of 5.00 spent), three on i-a's 23:00 of
    day 0 (one of them in EUR too), i-b's hours alone, an hour of nothing wasted, and an
    unattributed hour on a shared line (not waste: never counted, never sharing)."""
    idle = finding(Kind.IDLE_GPU, "i-a")
    failed = finding(Kind.FAILED_RUN, "run-1")
    notebook = finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-1")
    other = finding(Kind.IDLE_GPU, "i-b")
    unattributed = finding(Kind.UNATTRIBUTED, "u-1")
    hours(
        idle,
        ("i-a", 0, 10, "USD", "3.00", "5.00"),
        ("i-a", 0, 23, "USD", "2.50", "6.00"),
        ("i-a", 1, 0, "USD", "1.25", "2.00"),
        ("i-a", 2, 5, "USD", "0", "2.00"),
    )
    hours(
        failed,
        ("i-a", 0, 10, "USD", "4.00", "5.00"),
        ("i-a", 0, 23, "USD", "6.00", "6.00"),
        ("i-a", 0, 23, "EUR", "1.10", "1.10"),
    )
    hours(notebook, ("i-a", 0, 23, "USD", "1.00", "6.00"), ("nb", 1, 4, "USD", "0.75", "0.75"))
    hours(other, ("i-b", 0, 10, "USD", "2.00", "2.00"), ("i-b", 2, 22, "USD", "1.50", "1.50"))
    hours(unattributed, ("i-a", 1, 0, "USD", "2.00", "2.00"), ("u", 2, 1, "USD", "9.00", "9.00"))
    day_rollup_rebuild(start=None, end=None)
    return [idle, failed, notebook, other, unattributed]


def reference(findings, start, end) -> dict[str, Decimal]:
    """The hour-by-hour count (the SQLite path), from the hours themselves."""
    rows = FindingHour.objects.filter(
        finding__in=findings.exclude(kind=Kind.UNATTRIBUTED), wasted__gt=0
    )
    if start is not None:
        rows = rows.filter(hour__gte=datetime.combine(start, datetime.min.time(), UTC))
    if end is not None:
        rows = rows.filter(hour__lt=datetime.combine(end, datetime.min.time(), UTC))
    return {currency: amount for currency, amount in _counted_once(rows).items() if amount}


def test_the_days_and_shared_hours_hold_what_the_hours_do(overlapping):
    idle, failed, notebook, other, unattributed = overlapping
    days = {
        (row.finding_id, row.day, row.currency): (row.wasted, row.alone)
        for row in FindingDay.objects.all()
    }
    d0, d1, d2 = DAY, DAY + timedelta(days=1), DAY + timedelta(days=2)
    assert days == {
        # i-a's 10:00 and 23:00 are shared: nothing of day 0 counts alone.
        (idle.pk, d0, "USD"): (Decimal("5.50"), Decimal("0")),
        # 00:00 of day 1: the unattributed hour on the same line is not waste, so it is alone.
        (idle.pk, d1, "USD"): (Decimal("1.25"), Decimal("1.25")),
        (idle.pk, d2, "USD"): (Decimal("0"), Decimal("0")),
        (failed.pk, d0, "USD"): (Decimal("10.00"), Decimal("0")),
        (failed.pk, d0, "EUR"): (Decimal("1.10"), Decimal("1.10")),
        (notebook.pk, d0, "USD"): (Decimal("1.00"), Decimal("0")),
        (notebook.pk, d1, "USD"): (Decimal("0.75"), Decimal("0.75")),
        (other.pk, d0, "USD"): (Decimal("2.00"), Decimal("2.00")),
        (other.pk, d2, "USD"): (Decimal("1.50"), Decimal("1.50")),
        (unattributed.pk, d1, "USD"): (Decimal("2.00"), Decimal("0")),
        (unattributed.pk, d2, "USD"): (Decimal("9.00"), Decimal("0")),
    }
    shared = sorted(
        (row.finding_id, row.hour.hour, row.wasted) for row in FindingSharedHour.objects.all()
    )
    assert shared == sorted(
        [
            (idle.pk, 10, Decimal("3.00")),
            (failed.pk, 10, Decimal("4.00")),
            (idle.pk, 23, Decimal("2.50")),
            (failed.pk, 23, Decimal("6.00")),
            (notebook.pk, 23, Decimal("1.00")),
        ]
    )


def test_any_set_of_findings_over_any_period_counts_as_the_hours_do(overlapping):
    periods = [
        (None, None),
        (DAY, DAY + timedelta(days=1)),
        (DAY + timedelta(days=1), None),
        (None, DAY + timedelta(days=2)),
        (DAY + timedelta(days=2), DAY + timedelta(days=3)),
    ]
    compared = 0
    for size in range(1, len(overlapping) + 1):
        for chosen in itertools.combinations(overlapping, size):
            findings = Finding.objects.filter(pk__in=[f.pk for f in chosen])
            for start, end in periods:
                assert wasted_counted_once(findings=findings, start=start, end=end) == reference(
                    findings, start, end
                ), (chosen, start, end)
                compared += 1
    assert compared == 31 * 5
    # Every finding at once over all time: 5.00 (i-a 10:00, under the 5.00 spent), 6.00 of i-a's
    # 23:00 (capped by its spend), 1.25 + 2.00 + 1.50 + 0.75; EUR 1.10 alone.
    everything = Finding.objects.all()
    assert wasted_counted_once(findings=everything, start=None, end=None) == {
        "USD": Decimal("16.50"),
        "EUR": Decimal("1.10"),
    }


def test_period_sums_per_finding_read_the_days(overlapping):
    idle, failed, *_ = overlapping
    assert wasted_in_period(
        findings=Finding.objects.filter(pk__in=[idle.pk, failed.pk]),
        start=DAY,
        end=DAY + timedelta(days=1),
    ) == {
        idle.pk: {"USD": Decimal("5.50")},
        failed.pk: {"USD": Decimal("10.00"), "EUR": Decimal("1.10")},
    }
    totals = waste_totals(
        findings=Finding.objects.all(), start=None, end=None, today=DAY + timedelta(days=3)
    )
    assert totals.unattributed == {"USD": Decimal("11.00")}


def test_a_rebuild_of_some_days_leaves_the_others(overlapping):
    idle = overlapping[0]
    FindingHour.objects.filter(finding=idle, hour__gte=hour(1, 0)).update(wasted=Decimal("7"))
    day_rollup_rebuild(start=DAY + timedelta(days=2), end=DAY + timedelta(days=3))
    days = dict(FindingDay.objects.filter(finding=idle).values_list("day", "wasted"))
    # Day 1 was not rebuilt (it still says 1.25); day 2 was (its hour now wastes 7).
    assert days == {
        DAY: Decimal("5.50"),
        DAY + timedelta(days=1): Decimal("1.25"),
        DAY + timedelta(days=2): Decimal("7"),
    }
    assert FindingDay.objects.count() == 11
    assert FindingSharedHour.objects.count() == 5


def test_the_shared_line_hours_are_grouped_by_their_findings_and_counted_per_day(overlapping):
    idle, failed, notebook, *_ = overlapping
    groups = {group.members: group.size for group in FindingShareGroup.objects.all()}
    pair = ",".join(str(pk) for pk in sorted([idle.pk, failed.pk]))
    three = ",".join(str(pk) for pk in sorted([idle.pk, failed.pk, notebook.pk]))
    assert groups == {pair: 2, three: 3}
    members = sorted(
        (row.group.members, row.finding_id) for row in FindingShareMember.objects.all()
    )
    assert len(members) == 5
    # 10:00: the least of 7.00 wasted and 5.00 spent; 23:00: of 9.50 and 6.00.
    assert sorted(
        (row.group.members, row.day, row.counted) for row in FindingShareDay.objects.all()
    ) == sorted([(pair, DAY, Decimal("5.00")), (three, DAY, Decimal("6.00"))])


def test_a_finding_deleted_in_the_admin_leaves_the_others_counted_as_their_hours(overlapping):
    failed = overlapping[1]
    seen = days_seen(Finding.objects.filter(pk=failed.pk))
    assert seen == (DAY, DAY)
    failed.delete()
    days_forget(seen)
    assert not FindingDay.objects.filter(finding_id=failed.pk).exists()
    assert not FindingShareMember.objects.filter(finding_id=failed.pk).exists()
    everything = Finding.objects.all()
    # i-a's 10:00 is now i-a's alone (3.00); 23:00 idle 2.50 + notebook 1.00 (under 6.00).
    assert (
        wasted_counted_once(findings=everything, start=None, end=None)
        == reference(everything, None, None)
        == {
            "USD": Decimal("3.00")
            + Decimal("3.50")
            + Decimal("1.25")
            + Decimal("0.75")
            + Decimal("3.50")
        }
    )
    assert set(FindingShareGroup.objects.values_list("size", flat=True)) == {2}


def test_the_recompute_keeps_the_days_of_its_hours(bill):
    findings_recompute()
    from_hours = {
        (row["finding_id"], row["hour__date"], row["currency"]): row["wasted"]
        for row in FindingHour.objects.values("finding_id", "hour__date", "currency")
        .annotate(wasted=Sum("wasted"))
        .order_by()
    }
    from_days = {
        (row.finding_id, row.day, row.currency): row.wasted for row in FindingDay.objects.all()
    }
    assert from_days == from_hours
    assert len(from_days) > 0
    wasted = sum(from_days.values(), Decimal("0"))
    # Run again: the same days, nothing doubled.
    findings_recompute()
    assert sum(FindingDay.objects.values_list("wasted", flat=True), Decimal("0")) == wasted


def days_of_hours() -> dict:
    return {
        (row["finding_id"], row["hour__date"], row["currency"]): row["wasted"]
        for row in FindingHour.objects.values("finding_id", "hour__date", "currency")
        .annotate(wasted=Sum("wasted"))
        .order_by()
    }


@time_machine.travel(datetime(2025, 3, 13, 9, tzinfo=UTC), tick=False)
def test_a_recompute_rebuilds_only_the_days_whose_hours_changed(bill, delivery):
    first = findings_recompute().summary["day_rollup"]
    # The first recompute wrote every hour: its whole period (all time) rebuilt.
    assert first["stretches"] == [[None, None]]
    # Again, nothing changed: nothing rebuilt. (The unattributed subject under the threshold,
    # 111/EC2-Other's day, has its hours written and dropped again with its stillborn finding:
    # they leave no trace, and are not counted as a change.)
    again = findings_recompute().summary["day_rollup"]
    assert again["stretches"] == []
    # 20.00 of a stray box on 12 March: that day alone.
    line(delivery, "2025-03-12 14:00", "2025-03-12 15:00", "20.00", resource="i-new")
    changed = findings_recompute().summary["day_rollup"]
    assert changed["stretches"] == [["2025-03-12", "2025-03-13"]]
    assert changed["days"] > 0
    from_days = {
        (row.finding_id, row.day, row.currency): row.wasted for row in FindingDay.objects.all()
    }
    assert from_days == days_of_hours()


def test_the_changed_days_are_rebuilt_in_stretches_or_as_one_span_when_scattered():
    changed = HoursChanged()
    for finding_id, day in [(1, 10), (1, 11), (2, 11), (2, 14), (3, 20)]:
        changed.day(finding_id, DAY.replace(day=day))
    changed.forget([3])  # stillborn
    assert changed.stretches(start=None, end=None) == [
        (DAY, DAY.replace(day=12)),
        (DAY.replace(day=14), DAY.replace(day=15)),
    ]
    # Within the recompute's period only.
    assert changed.stretches(start=DAY.replace(day=11), end=DAY.replace(day=14)) == [
        (DAY.replace(day=11), DAY.replace(day=12))
    ]
    scattered = HoursChanged()
    for n in range(HoursChanged.STRETCHES + 1):
        scattered.day(1, DAY + timedelta(days=2 * n))
    assert scattered.stretches(start=None, end=None) == [
        (DAY, DAY + timedelta(days=2 * HoursChanged.STRETCHES + 1))
    ]
    scattered.everywhere()
    assert scattered.stretches(start=DAY, end=None) == [(DAY, None)]


def test_a_finding_deleted_through_the_admin_page_is_counted_out_and_its_kind_is_not_edited(
    overlapping, staff_client
):
    idle, failed = overlapping[0], overlapping[1]
    change = staff_client.get(f"/admin/insights/finding/{idle.pk}/change/").content.decode()
    assert 'name="kind"' not in change and 'name="subject_key"' not in change
    response = staff_client.post(f"/admin/insights/finding/{failed.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    everything = Finding.objects.all()
    assert wasted_counted_once(findings=everything, start=None, end=None) == reference(
        everything, None, None
    )
    assert not FindingDay.objects.filter(finding_id=failed.pk).exists()


def test_a_rebuild_holds_the_rebuild_lock_until_its_transaction_ends(overlapping):
    """Two rebuilds at once (the recompute's, an admin delete's) would each write the days:
    the second waits for the first's commit. Here the test's transaction holds it."""
    day_rollup_rebuild(start=DAY, end=DAY + timedelta(days=1))
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        taken = other.execute("SELECT pg_try_advisory_lock(%s)", [REBUILD_LOCK]).fetchone()[0]
    assert taken is False
