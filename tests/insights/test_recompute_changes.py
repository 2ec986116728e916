"""A recompute writes only what changed, for the kinds computed in SQL and in Python (their
hours diffed against the stored ones on PostgreSQL, services._hours_diff_write) and for the
findings' figures (services._refresh: a finding whose figures did not change keeps its row
and its updated_at). On part 3's hand-computed bill (test_part3.py): failed run "crashed" on
i-f, GPU 10:00-13:00 9.00 and CPU 10:00 1.50 -> 10.50 over 3 billed hours."""

from decimal import Decimal

import pytest
from django.db import connection

from apps.billing.models import CostKind, CostLineItem
from apps.insights import services
from apps.insights.models import Finding, Kind

from . import test_part3
from .test_part3 import at

pytestmark = pytest.mark.django_db

# Part 3's bill and its first recompute (test_part3.py's fixtures).
delivery = test_part3.delivery
part3 = test_part3.part3

PYTHON_KINDS = [kind for kind in services.KIND_HOURS if kind not in services.KIND_SQL]


def crashed_cpu_costs(amount: str) -> None:
    changed = CostLineItem.objects.filter(
        resource_id="i-f",
        cost_kind=CostKind.CPU_COMPUTE,
        charge_period_start=at("2025-03-05 10:00"),
    ).update(effective_cost=Decimal(amount))
    assert changed == 1


def crashed(runs) -> Finding:
    return Finding.objects.get(kind=Kind.FAILED_RUN, subject_key=f"run:{runs['crashed'].pk}")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the diff-write is PostgreSQL's")
def test_the_nightly_recompute_writes_and_deletes_no_unchanged_hour(part3):
    again = services.findings_recompute().summary["kinds"]
    assert again[Kind.FAILED_RUN]["hours"] == 5  # "crashed" 3, "big" 2 (in SQL)
    assert again[Kind.STALLED_RUN]["hours"] == 32  # in Python
    assert Kind.STALLED_RUN in PYTHON_KINDS and Kind.FAILED_RUN not in PYTHON_KINDS
    # (An unattributed subject under the threshold is written and dropped each time: the SQL
    # kinds' known exception, test_recompute_again.py.)
    written = {kind: (again[kind]["hours_written"], again[kind]["hours_deleted"]) for kind in again}
    del written[Kind.UNATTRIBUTED]
    assert written == {kind: (0, 0) for kind in written}
    # The CPU line of 10:00 from 1.50 to 2.50: that one hour of the failed run is replaced.
    crashed_cpu_costs("2.50")
    changed = services.findings_recompute().summary["kinds"][Kind.FAILED_RUN]
    assert (changed["hours"], changed["hours_written"], changed["hours_deleted"]) == (5, 1, 1)
    finding = crashed(part3)
    assert finding.wasted == {"USD": "11.5"}
    assert finding.hours.get(hour=at("2025-03-05 10:00")).wasted == Decimal("5.5")
    assert sorted(finding.hours.values_list("wasted", flat=True)) == [
        Decimal("3"),
        Decimal("3"),
        Decimal("5.5"),
    ]


def test_a_changed_finding_is_updated_and_the_unchanged_ones_are_not_rewritten(part3):
    def rows() -> dict[int, tuple]:
        return {
            finding.pk: (finding.updated_at, finding.wasted, finding.reason, finding.evidence)
            for finding in Finding.objects.all()
        }

    before = rows()
    assert len(before) > 5
    services.findings_recompute()
    assert rows() == before  # nothing changed: no finding written, updated_at kept
    crashed_cpu_costs("2.50")
    services.findings_recompute()
    after = rows()
    finding = crashed(part3)
    assert finding.wasted == {"USD": "11.5"}
    assert finding.reason == "Run crashed failed: USD 11.50 over 3 billed hours"
    assert after[finding.pk][0] > before[finding.pk][0]
    assert {pk: row for pk, row in after.items() if pk != finding.pk} == {
        pk: row for pk, row in before.items() if pk != finding.pk
    }
