"""Never twice: the same delivery again changes nothing; a newer one for the same billing account
and period replaces the older one exactly; other accounts and periods are left alone."""

from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, DailyCost, Delivery, ImportRun
from apps.spend.selectors import spend_totals

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

FEBRUARY = {
    "BillingPeriodStart": "2025-02-01T00:00:00Z",
    "BillingPeriodEnd": "2025-03-01T00:00:00Z",
    "ChargePeriodStart": "2025-02-03T10:00:00Z",
    "ChargePeriodEnd": "2025-02-03T11:00:00Z",
}


def by_project() -> dict:
    return {t.key[0]: (t.effective_cost, t.billed_cost) for t in spend_totals(by=("project_id",))}


@pytest.fixture
def first_export(tmp_path):
    return write_focus(
        tmp_path / "export-v1.csv",
        [
            focus_line(Tags='{"project": "vision"}', EffectiveCost="10.00", BilledCost="11.00"),
            focus_line(Tags='{"project": "nlp"}', EffectiveCost="5.00", BilledCost="5.00"),
        ],
    )


@pytest.fixture
def restated_export(tmp_path):
    return write_focus(
        tmp_path / "export-v2.csv",
        [
            focus_line(Tags='{"project": "vision"}', EffectiveCost="12.00", BilledCost="12.50"),
            focus_line(Tags='{"project": "nlp"}', EffectiveCost="4.00", BilledCost="4.00"),
            focus_line(
                Tags='{"project": "nlp"}',
                ChargePeriodStart="2025-01-09T00:00:00Z",
                ChargePeriodEnd="2025-01-09T01:00:00Z",
                EffectiveCost="0.000000000000001",
                BilledCost="0.000000000000001",
            ),
        ],
    )


def test_importing_the_same_export_again_is_unchanged(acme, first_export):
    run_import(first_export)
    lines_before = list(CostLineItem.objects.values_list("id", flat=True))

    again = run_import(first_export)

    assert again.status == ImportRun.Status.UNCHANGED
    assert [r["status"] for r in again.results] == ["unchanged"]
    assert again.results[0]["rows"] == 2
    assert again.results[0]["effective_cost"] == {"USD": "15.00"}
    assert list(CostLineItem.objects.values_list("id", flat=True)) == lines_before
    assert Delivery.objects.count() == 1
    assert by_project() == {
        acme.vision.pk: (Decimal("10.00"), Decimal("11.00")),
        acme.nlp.pk: (Decimal("5.00"), Decimal("5.00")),
    }


def test_a_restated_export_replaces_the_period_exactly(acme, first_export, restated_export):
    first = run_import(first_export)

    second = run_import(restated_export)

    assert second.status == ImportRun.Status.SUCCEEDED
    old, new = Delivery.objects.order_by("pk")
    assert (old.status, new.status) == ("replaced", "current")
    assert second.results[0]["replaced"] == old.pk == first.results[0]["delivery"]
    assert by_project() == {
        acme.vision.pk: (Decimal("12.00"), Decimal("12.50")),
        acme.nlp.pk: (Decimal("4.000000000000001"), Decimal("4.000000000000001")),
    }
    assert CostLineItem.objects.count() == 3
    assert not CostLineItem.objects.filter(delivery=old).exists()
    assert not DailyCost.objects.filter(delivery=old).exists()
    assert second.effective_cost == {"USD": "16.000000000000001"}


def test_an_older_export_imported_after_a_restatement_does_not_undo_it(
    acme, first_export, restated_export
):
    run_import(first_export)
    run_import(restated_export)

    late = run_import(first_export)

    assert late.status == ImportRun.Status.UNCHANGED
    assert by_project()[acme.vision.pk] == (Decimal("12.00"), Decimal("12.50"))
    assert Delivery.objects.filter(status="current").count() == 1


def test_restating_one_account_leaves_another_accounts_period_alone(
    acme, first_export, restated_export, tmp_path
):
    other = write_focus(
        tmp_path / "other-account.csv",
        [
            focus_line(
                BillingAccountId="333333333333",
                Tags='{"project": "search"}',
                EffectiveCost="7.77",
                BilledCost="7.77",
            ),
        ],
    )
    run_import(other)
    run_import(first_export)

    run_import(restated_export)

    assert by_project()[acme.search.pk] == (Decimal("7.77"), Decimal("7.77"))
    assert Delivery.objects.filter(status="current").count() == 2


def test_a_file_with_two_periods_makes_two_deliveries_replaced_one_at_a_time(acme, tmp_path):
    both = write_focus(
        tmp_path / "jan-feb.csv",
        [
            focus_line(Tags='{"project": "vision"}', EffectiveCost="1.00", BilledCost="1.00"),
            focus_line(
                Tags='{"project": "vision"}', EffectiveCost="2.00", BilledCost="2.00", **FEBRUARY
            ),
        ],
    )
    run = run_import(both)
    assert [(r["billing_period_start"], r["rows"]) for r in run.results] == [
        ("2025-01-01T00:00:00Z", 1),
        ("2025-02-01T00:00:00Z", 1),
    ]

    january_again = write_focus(
        tmp_path / "jan-v2.csv",
        [
            focus_line(Tags='{"project": "vision"}', EffectiveCost="1.50", BilledCost="1.50"),
        ],
    )
    run_import(january_again)

    assert sorted(DailyCost.objects.values_list("day", "effective_cost").order_by("day")) == [
        (DailyCost.objects.get(day__month=1).day, Decimal("1.50")),
        (DailyCost.objects.get(day__month=2).day, Decimal("2.00")),
    ]
    assert run_import(both).status == ImportRun.Status.UNCHANGED


def test_one_run_of_two_files_is_unchanged_only_where_both_were_seen(
    acme, first_export, restated_export
):
    run_import(first_export)

    run = run_import(first_export, restated_export)

    assert run.status == ImportRun.Status.SUCCEEDED
    assert [r["status"] for r in run.results] == ["unchanged", "succeeded"]
    assert run.effective_cost == {"USD": "16.000000000000001"}
    assert by_project()[acme.vision.pk] == (Decimal("12.00"), Decimal("12.50"))


def test_a_delivery_records_the_id_range_its_lines_lie_in(acme, first_export, restated_export):
    run_import(first_export)
    run_import(restated_export)

    for delivery in Delivery.objects.all():
        ids = list(CostLineItem.objects.filter(delivery=delivery).values_list("id", flat=True))
        assert all(delivery.first_line_id < i <= delivery.last_line_id for i in ids)
        assert sorted(CostLineItem.objects.of_delivery(delivery).values_list("id", flat=True)) == (
            sorted(ids)
        )
    current = Delivery.objects.get(status="current")
    assert CostLineItem.objects.of_delivery(current).count() == 3
