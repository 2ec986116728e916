"""The working set of a recompute on PostgreSQL (compute.working_set_create): one scan of the bill
copies the lines some kind reads into a temporary table that stands for the line table, and the
recompute drops it again, so nothing after it reads the copy. Every other test of the kinds runs
through it on PostgreSQL (their hand-computed figures are its check that no kind misses a line);
these say what it holds and that it is gone afterwards."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from apps.billing.models import CostKind, CostLineItem
from apps.insights import compute, services
from apps.insights.models import Finding, Kind, RecomputeRun
from tests.factories import ExperimentFactory

from .conftest import at, line

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the working set is PostgreSQL's"),
]


def test_the_working_set_holds_the_lines_some_kind_reads_and_no_other(delivery, project):
    run = ExperimentFactory(project=project)
    as_of = at("2025-03-10 16:00")
    kept = [
        line(delivery, "2025-03-10 10:00", "2025-03-10 11:00", "4.00", project=project),
        line(delivery, "2025-03-01 10:00", "2025-03-01 11:00", "1.00", kind=CostKind.OTHER),
        line(
            delivery,
            "2025-03-02 10:00",
            "2025-03-02 11:00",
            "2.00",
            project=project,
            experiment=run,
            kind=CostKind.NETWORK,
        ),
        # Storage of the last 31 days (cheaper_region's warning reads the last 30).
        line(
            delivery,
            "2025-02-07 16:00",
            "2025-02-07 17:00",
            "3.00",
            project=project,
            kind=CostKind.STORAGE,
        ),
    ]
    committed = line(
        delivery, "2025-03-03 10:00", "2025-03-03 11:00", "5.00", project=project, kind="other"
    )
    committed.commitment_discount_id = "sp-1"
    committed.save()
    fee = line(delivery, "2025-03-04 00:00", "2025-03-05 00:00", "6.00", project=project)
    fee.cost_kind, fee.extra = CostKind.OTHER, {"x_LineItemType": "SavingsPlanRecurringFee"}
    fee.save()
    kept += [committed, fee]
    # Left out: a project's CPU box, its older storage, a fee line of another type.
    line(
        delivery,
        "2025-03-10 10:00",
        "2025-03-10 11:00",
        "7.00",
        project=project,
        kind="cpu_compute",
    )
    line(
        delivery,
        "2025-02-07 15:00",
        "2025-02-07 16:00",
        "8.00",
        project=project,
        kind=CostKind.STORAGE,
    )
    usage = line(delivery, "2025-03-05 00:00", "2025-03-05 01:00", "9.00", project=project)
    usage.cost_kind, usage.extra = CostKind.OTHER, {"x_LineItemType": "Usage"}
    usage.save()
    assert as_of - timedelta(days=compute.STORAGE_DAYS) == at("2025-02-07 16:00")

    with connection.cursor() as cursor:
        assert compute.working_set_create(cursor, as_of=as_of) == 6
        seen = set(CostLineItem.objects.values_list("pk", flat=True))
        compute.working_set_drop(cursor)
    assert seen == {item.pk for item in kept}
    assert CostLineItem.objects.count() == 9


def test_a_recompute_drops_its_working_set_so_lines_loaded_after_it_count_next_time(
    organization, delivery
):
    line(delivery, "2025-03-10 10:00", "2025-03-10 11:00", "12.00", service="Support", kind="other")
    services.findings_recompute()
    support = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key="111/Support")
    assert support.wasted == {"USD": "12"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('pg_temp.billing_costlineitem')")
        assert cursor.fetchone() == (None,)
    line(delivery, "2025-03-10 11:00", "2025-03-10 12:00", "3.50", service="Support", kind="other")
    services.findings_recompute()
    support.refresh_from_db()
    assert support.wasted == {"USD": "15.5"}
    assert RecomputeRun.objects.latest("pk").summary["working_set"]["lines"] == 2


def test_a_recompute_again_writes_only_the_hours_that_changed(bill):
    """(A subject under the unattributed threshold is still written and dropped each time: the
    threshold is applied after its hours are stored.)"""
    services.findings_recompute()
    again = services.findings_recompute().summary["kinds"]
    assert (again[Kind.IDLE_GPU]["hours_written"], again[Kind.IDLE_GPU]["hours_deleted"]) == (
        0,
        0,
    )
    # i-a's 10:00 line from 4.00 to 8.00: 8.00 × 45/60 + 4.00 × 30/60 = 6.00 + 2.00.
    CostLineItem.objects.filter(
        resource_id="i-a",
        cost_kind=CostKind.GPU_COMPUTE,
        charge_period_start=at("2025-03-10 10:00"),
    ).update(effective_cost=Decimal("8.00"))
    changed = services.findings_recompute().summary["kinds"]
    assert (changed[Kind.IDLE_GPU]["hours_written"], changed[Kind.IDLE_GPU]["hours_deleted"]) == (
        1,
        1,
    )
    assert changed[Kind.IDLE_GPU]["hours"] == again[Kind.IDLE_GPU]["hours"]
    assert Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a").wasted == {"USD": "8"}
