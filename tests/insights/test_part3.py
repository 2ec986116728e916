"""Part 3's kinds on a small bill worked out by hand, and the pages that show them (USD, March
2025; the bill's data as of 11 March 00:00 UTC, so the levers read 9 February – 11 March).

failed_run     run "crashed" (failed, 2 GPUs) on i-f, 5 Mar: GPU 10:00-13:00 9.00, CPU 10:00 1.50
               -> 10.50. Run "fine" (succeeded) on i-ok: nothing.
no_small_run   (model "ranker"; the 2-GPU "crashed" is of no model, so no smaller run of it)
               run "big" (failed, 8 GPUs) 6 Mar 00:00-02:00 on i-b 40.00, no smaller run before it
               -> 40.00 (and failed_run 40.00: counted once, 40.00 in the total).
               run "big-2" (stopped, 8 GPUs, 8 Mar 00:00-01:00, 5.00) had "small" (1 GPU, 7 Mar
               12:00) before it: nothing.
stalled_run    run "pretrain" (running) on i-t, 30 loss points one an hour from 9 Mar 00:30:
               2.0, 1.9, ... 0.6 (points 0-14), then 0.6 (15-29) but 0.599 at point 25. Tail = the
               last max(10, ⌈6⌉) = 10 points (split 20): (0.6 − 0.599) ÷ 0.6 = 0.167% < 1%.
               The split still passes at 19..15; at 14 (0.7 before) it fails: plateau at point 15
               (step 1500, 9 Mar 15:30) -> from 16:00. Lines: 9 Mar (day) 48.00, 10 Mar 48.00
               (2.00 an hour): 8 × 2.00 + 48.00 = 64.00; savings 64.00 × 30 × 86400 ÷ 32 h
               = 1440.00 a month. Converging and noisy-but-improving runs: nothing.
spot_candidate catalogue aws p4d.24xlarge: us-east-1 32.00 (spot 12.00), us-west-2 30.00 (spot
               11.00), eu-west-1 36.00 (no spot).
               i-r, run "tune" (us-east-1, 10 h × 32.00 = 320.00, on-demand): spot 10 × 12.00 =
               120.00; rework 10 × 0.05 × 1 ÷ 2 = 0.25 h × 12.00 = 3.00 -> 197.00 a month.
               i-w, run "tagged" (us-west-2, 4 h × 30.00 = 120.00, tags: 0.2 interruptions an
               hour, 2 h checkpoints): spot 44.00; rework 4 × 0.2 × 2 ÷ 2 = 0.8 h × 11.00 = 8.80
               -> 67.20. Not: i-s (spot), i-c (committed), i-d (a deployment).
cheaper_region i-r: 10 h × (32.00 − 30.00) = 20.00 a month, with a warning (storage 5.00 of the
               project in us-east-1). i-d: 3 h × 2.00 = 6.00. i-w (us-west-2, the cheapest): none.
               Savings total per resource: i-r max(197, 20) = 197.00.
unused         sp-1: 10 Mar 00:00 used 3.00 and unused 1.00, 01:00 unused 4.00 -> 5.00, its use
               [10 Mar: used 3, unused 5]. sp-2 fully used: nothing.
"""

import json
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.test import Client

from apps.accounts.models import Organization
from apps.billing.loader import monthly_rebuild
from apps.billing.models import CostKind, CostLineItem, DailyCost, Delivery
from apps.experiments.models import Experiment, MetricPoint
from apps.insights import compute_part3
from apps.insights.models import Finding, GpuInstancePrice, Kind
from apps.insights.selectors import waste_totals
from apps.insights.services import findings_recompute
from tests.factories import DeploymentFactory, ExperimentFactory, ModelFactory

pytestmark = pytest.mark.django_db

_rows = count(2)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def delivery(db) -> Delivery:
    org = Organization.get()
    org.currency = "USD"
    org.save()
    return Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        billing_account_id="111",
        billing_period_start=at("2025-03-01 00:00"),
        billing_period_end=at("2025-04-01 00:00"),
        fingerprint="e" * 64,
        max_charge_period_end=at("2025-03-11 00:00"),
        max_usage_period_end=at("2025-03-11 00:00"),
    )


def line(delivery, start, end, cost, *, resource, run=None, kind=CostKind.GPU_COMPUTE, **fields):
    values = {
        "delivery": delivery,
        "source_row": next(_rows),
        "billing_account_id": delivery.billing_account_id,
        "billing_period_start": delivery.billing_period_start,
        "billing_period_end": delivery.billing_period_end,
        "charge_period_start": at(start),
        "charge_period_end": at(end),
        "charge_category": "Usage",
        "billing_currency": "USD",
        "billed_cost": Decimal(cost),
        "effective_cost": Decimal(cost),
        "service_name": "Amazon Elastic Compute Cloud",
        "provider_name": "AWS",
        "resource_id": resource,
        "project": run.project if run is not None else fields.pop("project", None),
        "experiment": run,
        "workload": "training",
        "cost_kind": kind,
    }
    values.update(fields)
    return CostLineItem.objects.create(**values)


def hourly(delivery, day, first, hours, price, *, resource, run=None, **fields):
    start = at(f"{day} {first:02d}:00")
    for number in range(hours):
        moment = start + timedelta(hours=number)
        line(
            delivery,
            f"{moment:%Y-%m-%d %H:%M}",
            f"{moment + timedelta(hours=1):%Y-%m-%d %H:%M}",
            price,
            resource=resource,
            run=run,
            consumed_quantity=Decimal("1"),
            consumed_unit="Hours",
            **fields,
        )


def loss(run, values, *, first="2025-03-09 00:30", name="loss"):
    start = at(first)
    MetricPoint.objects.bulk_create(
        MetricPoint(
            experiment=run,
            name=name,
            step=number * 100,
            value=value,
            recorded_at=start + timedelta(hours=number),
        )
        for number, value in enumerate(values)
    )


PLATEAU = [round(2.0 - 0.1 * i, 4) for i in range(15)] + [0.6] * 15
PLATEAU[25] = 0.599


@pytest.fixture
def part3(delivery, project):
    runs = {}
    runs["crashed"] = ExperimentFactory(
        project=project,
        name="crashed",
        status=Experiment.Status.FAILED,
        gpu_count=2,
    )
    line(
        delivery,
        "2025-03-05 10:00",
        "2025-03-05 13:00",
        "9.00",
        resource="i-f",
        run=runs["crashed"],
    )
    line(
        delivery,
        "2025-03-05 10:00",
        "2025-03-05 11:00",
        "1.50",
        resource="i-f",
        run=runs["crashed"],
        kind=CostKind.CPU_COMPUTE,
    )
    runs["fine"] = ExperimentFactory(project=project, name="fine")
    line(
        delivery, "2025-03-05 10:00", "2025-03-05 12:00", "7.00", resource="i-ok", run=runs["fine"]
    )

    ranker = ModelFactory(project=project, name="ranker")
    runs["big"] = ExperimentFactory(
        project=project,
        model=ranker,
        name="big",
        status=Experiment.Status.FAILED,
        started_at=at("2025-03-06 00:00"),
        ended_at=at("2025-03-06 02:00"),
    )
    line(delivery, "2025-03-06 00:00", "2025-03-06 02:00", "40.00", resource="i-b", run=runs["big"])
    runs["small"] = ExperimentFactory(
        project=project, model=ranker, name="small", gpu_count=1, started_at=at("2025-03-07 12:00")
    )
    runs["big-2"] = ExperimentFactory(
        project=project,
        model=ranker,
        name="big-2",
        status=Experiment.Status.STOPPED,
        started_at=at("2025-03-08 00:00"),
        ended_at=at("2025-03-08 01:00"),
    )
    line(
        delivery, "2025-03-08 00:00", "2025-03-08 01:00", "5.00", resource="i-b2", run=runs["big-2"]
    )

    runs["pretrain"] = ExperimentFactory(
        project=project,
        name="pretrain",
        status=Experiment.Status.RUNNING,
        started_at=at("2025-03-09 00:00"),
        ended_at=None,
    )
    loss(runs["pretrain"], PLATEAU)
    line(
        delivery,
        "2025-03-09 00:00",
        "2025-03-10 00:00",
        "48.00",
        resource="i-t",
        run=runs["pretrain"],
    )
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "48.00",
        resource="i-t",
        run=runs["pretrain"],
    )
    runs["converging"] = ExperimentFactory(project=project, name="converging")
    loss(runs["converging"], [1 / (1 + i) for i in range(30)])
    line(
        delivery,
        "2025-03-09 00:00",
        "2025-03-10 00:00",
        "24.00",
        resource="i-cv",
        run=runs["converging"],
    )
    runs["noisy"] = ExperimentFactory(project=project, name="noisy")
    loss(runs["noisy"], [2 - 0.05 * i + (0.03 if i % 2 else -0.03) for i in range(30)])
    line(
        delivery, "2025-03-09 00:00", "2025-03-10 00:00", "24.00", resource="i-n", run=runs["noisy"]
    )

    for region, on_demand, spot in (
        ("us-east-1", "32", "12"),
        ("us-west-2", "30", "11"),
        ("eu-west-1", "36", None),
    ):
        GpuInstancePrice.objects.create(
            provider="aws",
            instance_type="p4d.24xlarge",
            gpu_type="A100",
            gpu_count=8,
            region=region,
            on_demand_per_hour=Decimal(on_demand),
            spot_per_hour=Decimal(spot) if spot else None,
            source=f"test row {region}",
            as_of=at("2025-03-01 00:00").date(),
        )
    machine = {"instance_type": "p4d.24xlarge", "region_id": "us-east-1"}
    runs["tune"] = ExperimentFactory(project=project, name="tune", kind=Experiment.Kind.FINE_TUNING)
    hourly(
        delivery,
        "2025-03-10",
        0,
        10,
        "32.00",
        resource="i-r",
        run=runs["tune"],
        pricing_category="Standard",
        **machine,
    )
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "5.00",
        resource="bucket-1",
        project=project,
        kind=CostKind.STORAGE,
        region_id="us-east-1",
    )
    runs["tagged"] = ExperimentFactory(
        project=project,
        name="tagged",
        tags={"spot_interruptions_per_hour": "0.2", "checkpoint_interval_hours": "2"},
    )
    hourly(
        delivery,
        "2025-03-10",
        0,
        4,
        "30.00",
        resource="i-w",
        run=runs["tagged"],
        pricing_category="Standard",
        instance_type="p4d.24xlarge",
        region_id="us-west-2",
    )
    runs["spot"] = ExperimentFactory(project=project, name="on-spot", is_spot=True)
    hourly(
        delivery,
        "2025-03-10",
        0,
        4,
        "12.00",
        resource="i-s",
        run=runs["spot"],
        pricing_category="Dynamic",
        **machine,
    )
    runs["committed"] = ExperimentFactory(project=project, name="committed")
    hourly(
        delivery,
        "2025-03-10",
        0,
        4,
        "20.00",
        resource="i-c",
        run=runs["committed"],
        pricing_category="Committed",
        commitment_discount_id="sp-2",
        commitment_discount_status="Used",
        **machine,
    )
    serving = DeploymentFactory(project=project)
    hourly(
        delivery,
        "2025-03-10",
        0,
        3,
        "32.00",
        resource="i-d",
        project=project,
        deployment=serving,
        workload="inference",
        pricing_category="Standard",
        **machine,
    )

    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-10 01:00",
        "3.00",
        resource="i-x",
        project=project,
        pricing_category="Committed",
        commitment_discount_id="sp-1",
        commitment_discount_status="Used",
    )
    for hour, cost in (("00", "1.00"), ("01", "4.00")):
        line(
            delivery,
            f"2025-03-10 {hour}:00",
            f"2025-03-10 {int(hour) + 1:02d}:00",
            cost,
            resource="sp-1",
            pricing_category="Committed",
            commitment_discount_id="sp-1",
            commitment_discount_status="Unused",
            kind=CostKind.OTHER,
            workload="unattributed",
        )
    findings_recompute()
    return runs


def of(kind: str) -> dict[str, Finding]:
    return {
        (finding.experiment.name if finding.experiment else finding.subject_key): finding
        for finding in Finding.objects.filter(kind=kind).select_related("experiment")
    }


def test_failed_run_is_its_full_spend_and_a_succeeded_one_is_nothing(part3):
    failed = of(Kind.FAILED_RUN)
    assert sorted(failed) == ["big", "crashed"]
    crashed = failed["crashed"]
    assert crashed.wasted == {"USD": "10.5"}
    assert crashed.savings_per_month == {}
    assert crashed.resource_id == "i-f"
    assert crashed.subject_key == f"run:{part3['crashed'].pk}"
    assert crashed.reason == "Run crashed failed: USD 10.50 over 3 billed hours"
    assert (crashed.first_seen, crashed.last_seen) == (
        at("2025-03-05 10:00"),
        at("2025-03-05 12:00"),
    )


def test_a_big_run_that_ended_early_with_no_small_run_before_it(part3):
    assert sorted(of(Kind.NO_SMALL_RUN)) == ["big"]
    big = of(Kind.NO_SMALL_RUN)["big"]
    assert big.wasted == {"USD": "40"}
    assert big.savings_per_month == {}
    assert big.evidence["hours_run"] == "2.00"
    assert big.reason == (
        "8-GPU run big ended after 2.00 h with no smaller run before it: "
        "USD 40.00 not validated on a subset"
    )


def test_no_small_run_adds_a_reason_not_more_waste(part3):
    findings = Finding.objects.filter(kind__in=[Kind.FAILED_RUN, Kind.NO_SMALL_RUN])
    totals = waste_totals(findings=findings, start=None, end=None, today=at("2025-03-11 00:00"))
    assert totals.wasted == {"USD": Decimal("50.5")}  # 10.50 + 40.00 once


def test_a_stalled_run_wastes_its_spend_after_the_plateau(part3):
    assert sorted(of(Kind.STALLED_RUN)) == ["pretrain"]
    stalled = of(Kind.STALLED_RUN)["pretrain"]
    assert stalled.wasted == {"USD": "64"}
    assert stalled.savings_per_month == {"USD": "1440"}
    assert stalled.first_seen == at("2025-03-09 16:00")
    assert stalled.evidence["plateau_step"] == 1500
    assert stalled.evidence["plateau_at"] == "2025-03-09T15:30:00+00:00"
    assert stalled.evidence["improvement_percent"] == "0.167"
    assert stalled.reason == (
        "loss stopped converging: its tail bettered the best before it by 0.167% (under 1%): "
        "USD 64.00 spent after the plateau at step 1500"
    )


def test_stall_rule_on_plain_series():
    threshold = Decimal("0.01")
    assert compute_part3.stall(PLATEAU, threshold=threshold) == (15, Decimal("0.167"))
    assert compute_part3.stall([1 / (1 + i) for i in range(30)], threshold=threshold) is None
    noisy = [2 - 0.05 * i + (0.03 if i % 2 else -0.03) for i in range(30)]
    assert compute_part3.stall(noisy, threshold=threshold) is None
    assert compute_part3.stall([1.0] * 10, threshold=threshold) is None  # nothing before a tail


def test_a_loss_metric_named_by_the_run_is_read(part3, delivery, project):
    run = ExperimentFactory(project=project, name="own-metric", tags={"loss_metric": "train/loss"})
    loss(run, [1 / (1 + i) for i in range(30)])
    loss(run, PLATEAU, name="train/loss")
    line(delivery, "2025-03-10 00:00", "2025-03-11 00:00", "24.00", resource="i-o", run=run)
    findings_recompute()
    own = of(Kind.STALLED_RUN)["own-metric"]
    assert own.evidence["metric"] == "train/loss"
    assert own.wasted == {"USD": "24"}
    assert own.savings_per_month == {}  # succeeded: nothing more to save


def test_spot_candidates_save_at_the_spot_price_less_the_rework(part3):
    spot = of(Kind.SPOT_CANDIDATE)
    assert sorted(spot) == ["tagged", "tune"]
    tune = spot["tune"]
    assert tune.wasted == {}
    assert tune.savings_per_month == {"USD": "197"}
    assert tune.resource_id == "i-r"
    row = tune.evidence["prices"][0]
    assert (row["hours"], row["spot_cost"], row["rework_hours"], row["rework_cost"]) == (
        "10",
        "120",
        "0.25",
        "3",
    )
    assert tune.reason == (
        "On-demand p4d.24xlarge in us-east-1: spot would save USD 197.00 a month after rework"
    )
    tagged = spot["tagged"]
    assert tagged.savings_per_month == {"USD": "67.2"}
    assert tagged.evidence["prices"][0]["interruptions_from"] == "run"


def test_cheaper_region_and_its_data_warning(part3):
    region = {f.resource_id: f for f in Finding.objects.filter(kind=Kind.CHEAPER_REGION)}
    assert sorted(region) == ["i-d", "i-r"]  # i-w is in the cheapest region already
    assert region["i-r"].savings_per_month == {"USD": "20"}
    assert region["i-d"].savings_per_month == {"USD": "6"}
    assert region["i-r"].evidence["warning"] == (
        "The project's data sits in us-east-1 (USD 5.00 of storage in the last 30 days): "
        "moving the work costs egress."
    )
    assert "warning" not in region["i-d"].evidence or region["i-d"].project_id is not None
    assert region["i-r"].reason == (
        "p4d.24xlarge is cheaper in us-west-2 than in us-east-1: USD 20.00 a month "
        "(data sits here: egress)"
    )


def test_spot_and_region_exclude_each_other_in_the_savings_total(part3):
    findings = Finding.objects.filter(kind__in=[Kind.SPOT_CANDIDATE, Kind.CHEAPER_REGION])
    totals = waste_totals(findings=findings, start=None, end=None, today=at("2025-03-11 00:00"))
    # i-r max(197, 20) + i-w 67.20 + i-d 6.00
    assert totals.savings_per_month == {"USD": Decimal("270.2")}
    assert totals.wasted == {}


def test_unused_commitment_per_commitment_with_its_use(part3):
    unused = of(Kind.UNUSED_COMMITMENT)
    assert sorted(unused) == ["sp-1"]  # sp-2 is fully used
    finding = unused["sp-1"]
    assert finding.wasted == {"USD": "5"}
    assert finding.savings_per_month == {"USD": "5"}
    assert finding.evidence["use"] == [["2025-03-10", "USD", "3", "5"]]
    assert finding.reason == "Commitment unused: USD 5.00 paid for nothing over 2 hours"


def test_a_recompute_keeps_the_part3_findings(part3):
    before = {f.pk: (f.kind, f.wasted, f.savings_per_month) for f in Finding.objects.all()}
    findings_recompute()
    after = {f.pk: (f.kind, f.wasted, f.savings_per_month) for f in Finding.objects.all()}
    assert after == before


def test_a_cur_fee_line_of_a_reservation_is_its_unused_part(delivery):
    arn = "arn:aws:ec2:us-east-1:111:reserved-instances/ri-1"
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "2.40",
        resource=arn,
        kind=CostKind.OTHER,
        workload="unattributed",
        extra={"x_LineItemType": "RIFee"},
    )
    # A fee line with nothing unused (EffectiveCost 0) is no finding.
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "0",
        resource="ri-2",
        kind=CostKind.OTHER,
        workload="unattributed",
        extra={"x_LineItemType": "RIFee"},
    )
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.UNUSED_COMMITMENT)
    assert (finding.subject_key, finding.wasted) == (arn, {"USD": "2.4"})
    assert finding.evidence["use"] == [["2025-03-10", "USD", "0", "2.4"]]


# -- The pages ----------------------------------------------------------------------------------


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finding(kind, **where):
    return Finding.objects.get(kind=kind, **where)


def chart_of(body: str, chart_id: str) -> dict:
    match = re.search(rf'<script id="{chart_id}" type="application/json">(.*?)</script>', body)
    assert match, f"no {chart_id} in the page"
    return json.loads(match.group(1))


def test_the_waste_page_totals_failed_runs_and_draws_gpu_coverage(part3, lead, delivery, project):
    for pricing, cost in (("Committed", "30"), ("Standard", "50"), ("Dynamic", "20")):
        DailyCost.objects.create(
            delivery=delivery,
            project=project,
            day=date(2025, 3, 10),
            workload="training",
            cost_kind=CostKind.GPU_COMPUTE,
            pricing_category=pricing,
            billing_currency="USD",
            effective_cost=Decimal(cost),
            billed_cost=Decimal(cost),
            list_cost=Decimal(cost),
            line_items=1,
        )
    body = client_for(lead).get("/waste/?start=2025-03-01&end=2025-03-11").content.decode()
    # crashed 10.50 + big 40.00
    assert '<p class="figure" id="total-failed"><strong>$50.50</strong>' in body
    figure = chart_of(body, "coverage-chart")
    assert [(trace["name"], trace["y"]) for trace in figure["data"]] == [
        ("Committed", [30.0]),
        ("On-demand", [50.0]),
        ("Spot", [20.0]),
    ]


def test_a_stalled_runs_page_draws_the_loss_with_the_plateau(part3, lead):
    stalled = finding(Kind.STALLED_RUN)
    body = client_for(lead).get(f"/waste/{stalled.pk}/").content.decode()
    figure = chart_of(body, "evidence-chart")
    assert figure["data"][0]["x"][:3] == [0, 100, 200]
    assert figure["layout"]["shapes"][0]["x0"] == 1500
    assert "The plateau starts at step 1500" in body


def test_the_levers_pages_show_the_price_comparison_and_the_data_warning(part3, lead):
    spot = finding(Kind.SPOT_CANDIDATE, resource_id="i-r")
    body = client_for(lead).get(f"/waste/{spot.pk}/").content.decode()
    assert 'id="price-comparison"' in body
    assert "$197.00" in body and "$120.00" in body and "$3.00" in body
    region = finding(Kind.CHEAPER_REGION, resource_id="i-r")
    body = client_for(lead).get(f"/waste/{region.pk}/").content.decode()
    assert "The project&#x27;s data sits in us-east-1" in body
    assert "us-west-2 $30.00" in body


def test_a_commitments_page_draws_its_use(part3, lead):
    unused = finding(Kind.UNUSED_COMMITMENT)
    body = client_for(lead).get(f"/waste/{unused.pk}/").content.decode()
    figure = chart_of(body, "evidence-chart")
    assert [(trace["name"], trace["y"]) for trace in figure["data"]] == [
        ("Used (USD)", [3.0]),
        ("Unused (USD)", [5.0]),
    ]


def test_the_experiment_page_shows_its_stalled_and_spot_findings(part3, lead):
    body = client_for(lead).get(f"/experiments/{part3['pretrain'].pk}/").content.decode()
    assert "Run that stopped converging" in body
    body = client_for(lead).get(f"/experiments/{part3['tune'].pk}/").content.decode()
    assert "Spot candidate" in body and "$197.00" in body
    body = client_for(lead).get(f"/experiments/{part3['crashed'].pk}/").content.decode()
    assert "Run crashed failed: USD 10.50 over 3 billed hours" in body


def training_days(delivery, project, *rows: tuple[date, object, str]) -> None:
    """Daily rollup rows of training on the project: (day, run or None, cost in USD)."""
    for day, run, cost in rows:
        DailyCost.objects.create(
            delivery=delivery,
            project=project,
            experiment=run,
            day=day,
            workload="training",
            cost_kind=CostKind.GPU_COMPUTE,
            pricing_category="Standard",
            billing_currency="USD",
            effective_cost=Decimal(cost),
            billed_cost=Decimal(cost),
            list_cost=Decimal(cost),
            line_items=1,
        )


def failed_share(lead, project, start: str, end: str) -> str:
    """The project page's failed share line, as its text reads."""
    body = client_for(lead).get(f"/projects/{project.slug}/?start={start}&end={end}")
    text = body.content.decode()
    line = text[text.index('id="failed-share">') : text.index("</p>", text.index("failed-share"))]
    return " ".join(re.sub(r"<[^>]+>", "", line).split())


def test_the_project_page_shows_the_failed_share(part3, lead, delivery, project):
    # The daily rollup of 5 March: the failed run's 10.50 and 189.50 of other training.
    training_days(
        delivery,
        project,
        (date(2025, 3, 5), part3["crashed"], "10.50"),
        (date(2025, 3, 5), None, "189.50"),
    )

    # crashed 10.50 of 200.00 training spend on 5 March
    assert failed_share(lead, project, "2025-03-05", "2025-03-05").startswith(
        'id="failed-share">Failed runs: $10.50 of $200.00 training spend (5.3%)'
    )


def test_the_failed_share_of_a_long_range_reads_whole_months_as_months(
    part3, lead, delivery, project
):
    # 10 February: 4.00 of the failed run and 16.00 of other training; 5 March: 10.50 and
    # 189.50. From 1 February to 5 March, February is read from the monthly rollup.
    training_days(
        delivery,
        project,
        (date(2025, 2, 10), part3["crashed"], "4.00"),
        (date(2025, 2, 10), None, "16.00"),
        (date(2025, 3, 5), part3["crashed"], "10.50"),
        (date(2025, 3, 5), None, "189.50"),
    )
    monthly_rebuild(delivery_id=delivery.pk)
    # February is read as its month: its days, taken out now, are not read.
    DailyCost.objects.filter(day=date(2025, 2, 10)).delete()

    # 14.50 of 220.00: 6.6%
    assert failed_share(lead, project, "2025-02-01", "2025-03-05").startswith(
        'id="failed-share">Failed runs: $14.50 of $220.00 training spend (6.6%)'
    )
