"""One small FOCUS file that holds every way a line finds (or misses) its owner, with the exact
spend (EffectiveCost) and billed cost it must add up to per project, owner and workload."""

import json
from decimal import Decimal

import pytest

from apps.billing.loader import rollups_rebuild
from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost, Delivery, ImportRun
from apps.experiments.models import ExperimentResource
from apps.projects.models import AllocationRule
from apps.spend.selectors import spend_totals

from .conftest import focus_line, run_import, when, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

GPU8 = json.dumps({"InstanceType": "p4d.24xlarge", "GpuCount": 8})


def lines() -> list[dict]:
    return [
        # 2: a project tag on a bucket
        focus_line(
            Tags='{"project": "vision"}',
            ServiceCategory="Storage",
            ServiceName="Amazon Simple Storage Service",
            ResourceId="arn:aws:s3:::vision-data",
            EffectiveCost="10.50",
            BilledCost="12.00",
        ),
        # 3: project and run through aliases, one key with stray spaces and capitals
        focus_line(
            Tags='{" ML-Project ": "vision", "run-id": "run-17"}',
            SkuPriceDetails=GPU8,
            ResourceId="i-train",
            EffectiveCost="32.7726",
            BilledCost="32.7726",
        ),
        # 4: a fine-tuning run on a commitment: nothing billed, 15 decimals of spend
        focus_line(
            Tags='{"user:project": "nlp", "run-id": "ft-3"}',
            PricingCategory="committed",
            EffectiveCost="5.000000000000123",
            BilledCost="0",
        ),
        # 5: a deployment through the `service` alias; the GPU family comes from x_UsageType
        focus_line(
            Tags='{"project": "VISION", "service": "ranker"}',
            x_UsageType="BoxUsage:g5.xlarge",
            EffectiveCost="1.006",
            BilledCost="1.006",
        ),
        # 6: untagged, on a box two runs used at once: split 8:2 by their GPUs
        focus_line(
            ResourceId="i-shared", EffectiveCost="1.000000000000001", BilledCost="1.000000000000001"
        ),
        # 7: untagged, inside the notebook's window for this machine
        focus_line(
            ResourceId="i-notebook",
            ChargePeriodStart="2025-01-05T10:00:00Z",
            ChargePeriodEnd="2025-01-05T11:00:00Z",
            EffectiveCost="2.00",
            BilledCost="2.00",
        ),
        # 8: the same machine after the notebook let it go: nobody's
        focus_line(
            ResourceId="i-notebook",
            ChargePeriodStart="2025-01-07T10:00:00Z",
            ChargePeriodEnd="2025-01-07T11:00:00Z",
            EffectiveCost="3.00",
            BilledCost="3.00",
        ),
        # 9: a research sub-account two rules claim; the higher priority wins
        focus_line(SubAccountId="999000000001", EffectiveCost="4.00", BilledCost="4.00"),
        # 10: object storage a rule gives to nlp, matched without case
        focus_line(
            ServiceName="Amazon Simple Storage Service",
            ServiceCategory="Storage",
            EffectiveCost="0.25",
            BilledCost="0.25",
        ),
        # 11: egress nobody tagged
        focus_line(
            ServiceName="AWS Data Transfer",
            ServiceCategory="Networking",
            EffectiveCost="0.75",
            BilledCost="0.75",
        ),
        # 12: another currency: kept apart, never summed into USD
        focus_line(
            BillingCurrency="EUR",
            Tags='{"project": "vision"}',
            ServiceCategory="Storage",
            EffectiveCost="7.00",
            BilledCost="7.00",
        ),
        # 13: a project tag naming no project
        focus_line(Tags='{"project": "unknown-proj"}', EffectiveCost="0.50", BilledCost="0.50"),
        # 14: a credit, category in lower case, service category the literal NULL
        focus_line(
            Tags='{"project": "vision"}',
            ChargeCategory="credit",
            ServiceCategory="NULL",
            EffectiveCost="-2.50",
            BilledCost="-2.50",
        ),
        # 15: messy export: space for T, no zone, mixed case, exponent, NULL resource
        focus_line(
            Tags='{"project":"nlp"}',
            ChargePeriodStart="2025-01-03 04:00:00",
            ChargePeriodEnd="2025-01-03 05:00:00",
            ChargeFrequency="usage-based",
            ServiceCategory="storage",
            ResourceId="NULL",
            EffectiveCost="1.5E-2",
            BilledCost="0.015",
        ),
        # 16: tagged nlp on a vision run's machine: the tag wins, the machine gives no owner
        focus_line(
            Tags='{"project": "nlp"}', ResourceId="i-train", EffectiveCost="0.10", BilledCost="0.10"
        ),
        # 17: tagged vision on a vision run's machine: the machine names the run
        focus_line(
            Tags='{"project": "vision"}',
            ResourceId="i-train",
            EffectiveCost="0.40",
            BilledCost="0.40",
        ),
    ]


@pytest.fixture
def loaded(acme, tmp_path):
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-shared")
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-train")
    ExperimentResource.objects.create(experiment=acme.evaluation, resource_id="I-SHARED")
    ExperimentResource.objects.create(
        experiment=acme.notebook,
        resource_id="i-notebook",
        started_at=when("2025-01-05T00:00:00"),
        ended_at=when("2025-01-06T00:00:00"),
    )
    AllocationRule.objects.create(
        name="research accounts",
        field="sub_account_id",
        pattern="999*",
        priority=10,
        project=acme.search,
    )
    AllocationRule.objects.create(
        name="that one account",
        field="sub_account_id",
        pattern="999000000001",
        priority=90,
        project=acme.nlp,
    )
    AllocationRule.objects.create(
        name="s3 to nlp",
        field="service_name",
        pattern="amazon simple storage*",
        priority=50,
        project=acme.nlp,
        workload="storage",
    )
    run = run_import(write_focus(tmp_path / "january.csv", lines()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    return run


def totals(by: tuple[str, ...], currency: str = "USD") -> dict:
    return {
        t.key if len(t.key) > 1 else t.key[0]: (t.effective_cost, t.billed_cost)
        for t in spend_totals(by=by)
        if t.currency == currency
    }


def d(text: str) -> Decimal:
    return Decimal(text)


def test_spend_and_billed_cost_add_up_per_project(loaded, acme):
    assert totals(("project_id",)) == {
        acme.vision.pk: (d("44.978600000000001"), d("46.478600000000001")),
        acme.nlp.pk: (d("5.565000000000123"), d("0.565")),
        acme.search.pk: (d("4.00"), d("4.00")),
        None: (d("4.25"), d("4.25")),
    }


def test_another_currency_stays_apart(loaded, acme):
    assert totals(("project_id",), currency="EUR") == {acme.vision.pk: (d("7.00"), d("7.00"))}
    assert loaded.effective_cost == {"EUR": "7.00", "USD": "58.793600000000124"}
    assert loaded.billed_cost == {"EUR": "7.00", "USD": "55.293600000000001"}


def test_spend_and_billed_cost_add_up_per_owner(loaded, acme):
    assert totals(("experiment_id", "deployment_id")) == {
        (acme.resnet.pk, None): (d("33.972600000000001"), d("33.972600000000001")),
        (acme.notebook.pk, None): (d("2.00"), d("2.00")),
        (acme.finetune.pk, None): (d("5.000000000000123"), d("0")),
        (acme.evaluation.pk, None): (d("0.2"), d("0.2")),
        (None, acme.ranker.pk): (d("1.006"), d("1.006")),
        (None, None): (d("16.615"), d("18.115")),
    }


def test_spend_and_billed_cost_add_up_per_workload(loaded):
    assert totals(("workload",)) == {
        "training": (d("34.172600000000001"), d("34.172600000000001")),
        "fine_tuning": (d("5.000000000000123"), d("0")),
        "development": (d("2.00"), d("2.00")),
        "inference": (d("1.006"), d("1.006")),
        "storage": (d("10.765"), d("12.265")),
        "other": (d("1.60"), d("1.60")),
        "unattributed": (d("4.25"), d("4.25")),
    }


def test_a_line_two_runs_shared_is_split_by_gpus_and_adds_up_exactly(loaded, acme):
    parts = CostLineItem.objects.filter(source_row=6).order_by("-effective_cost")
    assert [(p.experiment_id, p.effective_cost, p.billed_cost, p.attributed_by) for p in parts] == [
        (acme.resnet.pk, d("0.800000000000001"), d("0.800000000000001"), "resource"),
        (acme.evaluation.pk, d("0.200000000000000"), d("0.200000000000000"), "resource"),
    ]
    assert loaded.results[0]["rows"] == 16
    assert loaded.results[0]["line_items"] == 17


def test_each_line_says_how_it_was_attributed(loaded):
    by_row = dict(CostLineItem.objects.values_list("source_row", "attributed_by"))
    assert {row: by_row[row] for row in (2, 3, 7, 8, 9, 10, 13, 17)} == {
        2: "tag",
        3: "tag",
        7: "resource",
        8: "",
        9: "rule",
        10: "rule",
        13: "",
        17: "tag",
    }


def test_messy_values_are_understood(loaded):
    line = CostLineItem.objects.get(source_row=15)
    assert line.charge_period_start == when("2025-01-03T04:00:00")
    assert line.charge_frequency == "Usage-Based"
    assert line.service_category == "Storage"
    assert line.resource_id == ""
    assert line.effective_cost == d("0.015")
    credit = CostLineItem.objects.get(source_row=14)
    assert (credit.charge_category, credit.service_category) == ("Credit", "")
    assert CostLineItem.objects.get(source_row=4).pricing_category == "Committed"
    assert CostLineItem.objects.get(source_row=3).tags == {
        "ML-Project": "vision",
        "run-id": "run-17",
    }


def test_cost_kind_and_gpus_come_from_the_sku_and_the_service(loaded):
    kinds = {
        row: (kind, instance, gpus)
        for row, kind, instance, gpus in CostLineItem.objects.values_list(
            "source_row", "cost_kind", "instance_type", "gpu_count"
        )
    }
    assert kinds[2] == ("storage", "", None)
    assert kinds[3] == ("gpu_compute", "p4d.24xlarge", 8)
    assert kinds[4] == ("cpu_compute", "", None)
    assert kinds[5] == ("gpu_compute", "g5.xlarge", None)
    assert kinds[11] == ("network", "", None)
    assert kinds[14] == ("other", "", None)
    assert CostLineItem.objects.get(source_row=5).extra == {"x_UsageType": "BoxUsage:g5.xlarge"}


def test_the_rollups_written_while_loading_equal_a_rebuild_from_the_lines(loaded):
    def snapshot(model, fields):
        return sorted(tuple(str(v) for v in row) for row in model.objects.values_list(*fields))

    daily_fields = [f.column for f in DailyCost._meta.concrete_fields if f.column != "id"]
    resource_fields = [
        f.column for f in DailyResourceCost._meta.concrete_fields if f.column != "id"
    ]
    before = snapshot(DailyCost, daily_fields), snapshot(DailyResourceCost, resource_fields)

    rollups_rebuild(delivery_id=Delivery.objects.get().pk)

    assert (
        snapshot(DailyCost, daily_fields),
        snapshot(DailyResourceCost, resource_fields),
    ) == before
    assert DailyCost.objects.filter(day="2025-01-03").count() == 1
    assert DailyResourceCost.objects.filter(resource_id="i-notebook").count() == 2


def test_a_line_counts_on_the_utc_day_its_charge_period_starts(acme, tmp_path):
    path = write_focus(
        tmp_path / "late.csv",
        [
            focus_line(
                Tags='{"project": "vision"}',
                ChargePeriodStart="2025-01-03T23:00:00-02:00",
                ChargePeriodEnd="2025-01-04T00:00:00-02:00",
                EffectiveCost="9.00",
                BilledCost="9.00",
            ),
        ],
    )
    run_import(path)

    assert list(DailyCost.objects.values_list("day", "effective_cost")) == [
        (when("2025-01-04T00:00:00").date(), d("9.00"))
    ]
