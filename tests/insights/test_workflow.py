"""A finding's identity, status and history across recomputes, snoozes, going and coming back,
counted-once totals and realised savings."""

import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection

from apps.billing.models import CostLineItem, DailyResourceCost
from apps.insights.days import day_rollup_rebuild
from apps.insights.models import (
    Finding,
    FindingEvent,
    FindingHour,
    Kind,
    RecomputeLock,
    RecomputeRun,
    Status,
)
from apps.insights.selectors import realised_savings, waste_totals
from apps.insights.services import (
    WorkflowError,
    finding_acknowledge,
    finding_resolve,
    finding_snooze,
    findings_recompute,
)
from apps.projects.ports import spend_data_changed

from .conftest import at, line

pytestmark = pytest.mark.django_db


def idle(subject: str) -> Finding:
    return Finding.objects.get(kind=Kind.IDLE_GPU, subject_key=subject)


def history(finding: Finding) -> list[tuple[str, str, str]]:
    return [
        (event.from_status, event.to_status, event.note)
        for event in FindingEvent.objects.filter(finding=finding)
    ]


def test_recomputing_twice_keeps_identity_status_and_figures(bill, lead):
    findings_recompute()
    first = idle("i-a")
    finding_acknowledge(finding=first, by=lead)
    findings_recompute()
    again = idle("i-a")
    assert again.pk == first.pk
    assert again.status == Status.ACKNOWLEDGED
    assert again.wasted == {"USD": "5"}
    assert Finding.objects.count() == 5
    assert history(again) == [("open", "acknowledged", "")]


def test_a_snooze_ends_on_its_day_and_the_finding_opens_again(bill, lead):
    with time_machine.travel(datetime(2025, 3, 11, 9, tzinfo=UTC), tick=False):
        findings_recompute()
        finding = finding_snooze(finding=idle("i-a"), by=lead, until=date(2025, 3, 14))
        findings_recompute()
        assert idle("i-a").status == Status.SNOOZED
    with time_machine.travel(datetime(2025, 3, 14, 0, 30, tzinfo=UTC), tick=False):
        findings_recompute()
    finding.refresh_from_db()
    assert (finding.status, finding.snoozed_until) == (Status.OPEN, None)
    assert history(finding) == [
        ("open", "snoozed", ""),
        ("snoozed", "open", "Snooze until 2025-03-14 ended."),
    ]


def test_snoozing_until_today_is_refused(bill, lead):
    findings_recompute()
    with pytest.raises(WorkflowError, match="^Snooze until a day after today.$"):
        finding_snooze(
            finding=idle("i-a"), by=lead, until=date(2025, 3, 10), today=date(2025, 3, 10)
        )


def test_a_finding_that_goes_and_comes_back_reopens_with_its_history(bill, delivery, project):
    findings_recompute()
    finding = idle("i-b")
    saved = list(CostLineItem.objects.filter(resource_id="i-b").values())
    CostLineItem.objects.filter(resource_id="i-b").delete()
    findings_recompute()
    finding.refresh_from_db()
    assert (finding.status, finding.wasted) == (Status.GONE, {})
    line(delivery, "2025-03-10 13:00", "2025-03-10 16:00", "9.00", resource="i-b", project=project)
    findings_recompute()
    finding.refresh_from_db()
    assert finding.pk == idle("i-b").pk
    assert (finding.status, finding.wasted) == (Status.OPEN, {"USD": "3.25"})
    assert history(finding) == [
        ("open", "gone", "Its cause disappeared."),
        ("gone", "open", "Came back."),
    ]
    assert len(saved) == 1


def test_a_claim_resolves_an_unattributed_finding(bill, project):
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key="i-u")
    CostLineItem.objects.filter(resource_id="i-u").update(project=project)
    findings_recompute()
    finding.refresh_from_db()
    assert finding.status == Status.RESOLVED
    assert history(finding) == [("open", "resolved", "Claimed: now attributed.")]


def test_unattributed_spend_is_shown_beside_wasted_never_in_it(bill):
    findings_recompute()
    totals = waste_totals(
        findings=Finding.objects.all(), start=None, end=None, today=date(2025, 3, 11)
    )
    # Idle: i-a 5 + i-b 3.25 + i-u 10. Unattributed: i-u 20 + S3 15 (EC2-Other's 3 is under
    # the threshold); i-u's idle 10 is in both, as waste and as spend nobody claimed.
    assert totals.wasted == {"USD": Decimal("18.25")}
    assert totals.unattributed == {"USD": Decimal("35.00")}
    assert totals.savings_per_month == {"USD": Decimal("18.25")}


def test_counted_once_totals_count_a_shared_line_hour_once_by_precedence(bill):
    findings_recompute()
    idle_a = idle("i-a")
    # A failed run on i-a's 10:00 and 12:00 hours (the kind part 3 computes): its 4.00 an hour
    # comes first, so i-a's idle 3.00 + 2.00 in those hours adds nothing more.
    failed = Finding.objects.create(
        kind=Kind.FAILED_RUN, subject_key="run:resnet-1", resource_id="i-a", reason="Failed"
    )
    for hour in ("10", "12"):
        FindingHour.objects.create(
            finding=failed,
            line_key="i-a",
            hour=datetime(2025, 3, 10, int(hour), tzinfo=UTC),
            currency="USD",
            wasted=Decimal("4.00"),
            spend=Decimal("4.00"),
        )
    day_rollup_rebuild(start=None, end=None)  # as the recompute does after writing hours
    both = Finding.objects.filter(pk__in=[idle_a.pk, failed.pk])
    totals = waste_totals(findings=both, start=None, end=None, today=date(2025, 3, 11))
    # 4.00 + 4.00 of the failed run; a plain sum would say 8.00 + 5.00 = 13.00.
    assert totals.wasted == {"USD": Decimal("8.00")}
    everything = waste_totals(
        findings=Finding.objects.all(), start=None, end=None, today=date(2025, 3, 11)
    )
    # i-b 3.25 + i-u 10 + i-a's 8.00 (its idle in the same hours counted under the failed run).
    assert everything.wasted == {"USD": Decimal("21.25")}


def test_realised_savings_compare_the_14_days_before_and_after_the_resolution(bill, delivery, lead):
    findings_recompute()
    finding = idle("i-a")
    for offset in range(1, 15):
        for day, amount in (
            (date(2025, 3, 20) - timedelta(days=offset), "10.00"),
            (date(2025, 3, 20) + timedelta(days=offset), "3.00"),
        ):
            DailyResourceCost.objects.create(
                delivery=delivery,
                day=day,
                resource_id="i-a",
                billing_account_id="111",
                workload="training",
                cost_kind="gpu_compute",
                billing_currency="USD",
                effective_cost=Decimal(amount),
                billed_cost=Decimal(amount),
                line_items=1,
            )
    with time_machine.travel(datetime(2025, 3, 20, 9, tzinfo=UTC), tick=False):
        finding_resolve(finding=finding, by=lead, note="Stopped the notebook at night.")
    not_yet = datetime(2025, 4, 3, 12, tzinfo=UTC)
    assert realised_savings(finding=finding, as_of=not_yet) == {}
    loaded = datetime(2025, 4, 4, tzinfo=UTC)
    assert realised_savings(finding=finding, as_of=loaded) == {"USD": Decimal("210")}


def test_resolving_without_a_note_is_refused(bill, lead):
    findings_recompute()
    with pytest.raises(WorkflowError, match="^Say how it was resolved.$"):
        finding_resolve(finding=idle("i-a"), by=lead, note="  ")


def test_announcing_spend_data_changed_enqueues_the_period_on_commit(
    bill, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        results = spend_data_changed.announce(
            start=date(2025, 3, 10), end=date(2025, 3, 11), reason="delivery"
        )
        assert Finding.objects.count() == 0
    # The spend figures' data version moves (in the transaction itself: no callback), then the
    # findings recompute and the digests' alerts check, each enqueued once it commits; the
    # recompute moves the findings version (a row, no callback either).
    assert results == [None, None, None]
    assert len(callbacks) == 2
    run = RecomputeRun.objects.get()
    assert (run.start, run.end, run.reason, run.status) == (
        date(2025, 3, 10),
        date(2025, 3, 11),
        "delivery",
        RecomputeRun.Status.SUCCEEDED,
    )
    assert idle("i-a").wasted == {"USD": "5"}


def test_a_recompute_found_holding_a_stale_lock_is_taken_over(bill):
    RecomputeLock.objects.create(pk=1, holder="dead", heartbeat_at=at("2025-03-01 00:00"))
    assert findings_recompute().status == RecomputeRun.Status.SUCCEEDED


def test_a_recompute_while_the_lock_is_held_waits_for_the_holder(bill):
    from django.utils import timezone

    RecomputeLock.objects.create(pk=1, holder="alive", heartbeat_at=timezone.now())
    assert findings_recompute().status == RecomputeRun.Status.QUEUED
    assert Finding.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_two_recomputes_at_once_give_the_same_findings_once(bill):
    if connection.vendor != "postgresql":
        pytest.skip("threads need a database with real concurrent connections")
    barrier = threading.Barrier(2)
    results = []

    def run():
        try:
            barrier.wait()
            results.append(findings_recompute().status)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(RecomputeRun.objects.values_list("status", flat=True)) == [
        "succeeded",
        "succeeded",
    ]
    assert Finding.objects.count() == 5
    assert idle("i-a").wasted == {"USD": "5"}
    assert RecomputeLock.objects.get().holder == ""
