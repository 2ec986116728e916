"""A recompute on PostgreSQL writes only the finding-hours that changed: the nightly recompute
finds nearly all of them as they were (services._kind_store_sql)."""

from decimal import Decimal

import pytest
from django.db import connection

from apps.billing.models import CostKind, CostLineItem
from apps.insights import services
from apps.insights.models import Finding, Kind

from .conftest import at

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the SQL path is PostgreSQL's"),
]


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
