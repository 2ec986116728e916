"""The demo's FOCUS files: written from the organisation's runs and deployments, realistic
enough to show every kind of attribution, and loaded by the pipeline like any export."""

from datetime import UTC, datetime

import pytest
from django.db.models import Sum

from apps.billing.models import CostLineItem
from apps.demo.billing import demo_billing_write
from apps.deployments.models import DeploymentResource
from apps.experiments.models import ExperimentResource
from bench.focus_bill import focus_benchmark_write

from .conftest import run_import

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

NOW = datetime(2025, 2, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def demo_run(acme, tmp_path):
    acme.resnet.is_spot = True
    acme.resnet.save()
    paths = demo_billing_write(directory=tmp_path, small=True, now=NOW)
    run = run_import(*paths)
    assert run.status == "succeeded", run.error
    return paths, run


def test_the_demo_writes_one_file_per_provider_and_month(demo_run):
    paths, run = demo_run
    assert [p.name for p in paths] == ["focus-aws-2025-01.csv", "focus-aws-2025-02.csv"]
    assert [r["billing_period_start"] for r in run.results] == [
        "2025-01-01T00:00:00Z",
        "2025-02-01T00:00:00Z",
    ]


def test_the_demo_registers_machines_for_runs_and_deployments_that_had_none(demo_run, acme):
    assert ExperimentResource.objects.count() == 4
    assert DeploymentResource.objects.filter(deployment=acme.ranker).count() == 1
    demo_billing_write(directory=demo_run[0][0].parent / "again", small=True, now=NOW)
    assert ExperimentResource.objects.count() == 4


def test_the_demo_shows_every_kind_of_attribution(demo_run, acme):
    by = set(CostLineItem.objects.values_list("attributed_by", flat=True))
    assert by == {"tag", "resource", ""}
    workloads = set(CostLineItem.objects.values_list("workload", flat=True))
    assert {
        "training",
        "fine_tuning",
        "development",
        "inference",
        "storage",
        "unattributed",
    } <= workloads
    kinds = set(CostLineItem.objects.values_list("cost_kind", flat=True))
    assert {"gpu_compute", "storage", "network", "other"} <= kinds
    forgotten = CostLineItem.objects.filter(resource_name="gpu-box-do-not-delete")
    assert set(forgotten.values_list("workload", "cost_kind")) == {("unattributed", "gpu_compute")}
    assert set(
        CostLineItem.objects.filter(experiment=acme.resnet).values_list(
            "pricing_category", flat=True
        )
    ) == {"Dynamic"}


def test_the_demo_commitment_fee_is_amortised_onto_the_usage_it_covers(demo_run):
    for month in (1, 2):
        lines = CostLineItem.objects.filter(charge_period_start__month=month)
        fee = lines.get(charge_category="Purchase")
        covered = lines.filter(pricing_category="Committed")
        assert fee.effective_cost == 0
        assert covered.aggregate(billed=Sum("billed_cost"))["billed"] == 0
        assert fee.billed_cost == covered.aggregate(spent=Sum("effective_cost"))["spent"] > 0


def test_the_benchmark_generator_writes_exactly_n_rows(tmp_path):
    path = focus_benchmark_write(tmp_path / "n.csv", rows=1234)
    with path.open() as handle:
        assert sum(1 for _ in handle) == 1235
