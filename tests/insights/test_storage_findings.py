"""The storage and egress findings (compute_storage.py) on small storage rollups worked out by
hand. USD; the bill's data as of 1 March 2025 00:00 UTC, so the last whole day is 28 February
and week 0 is 22–28 February. 1 GiB = 2^30 bytes; a day's bytes are its byte-seconds ÷ 86,400.

checkpoints_only_grow  bucket ckpt (checkpoints), 6 weeks from 18 January: 100, 110, 120, 130,
                       140, 150 GiB held all week, 0.01 a GiB-day (1.00 … 1.50 a day).
                       wasted: the bytes above the first day's 100 GiB, at 0.01: weeks of 10, 20,
                       30, 40, 50 GiB × 7 days × 0.01 = 0.70 + 1.40 + 2.10 + 2.80 + 3.50 = 10.50.
                       savings: (150 − 100) GiB ÷ 35 days × 30 × 0.01 × 30 = 90/7 a month.
                       bucket dip (100, 110, 105, 120, 130, 140): a week of decrease, nothing.
                       bucket data (dataset, growing as ckpt): not checkpoints, nothing.
storage_of_finished_runs  run "done" succeeded 1 Feb 12:00; 14 days on is 15 Feb 12:00, so its
                       storage counts from 16 Feb: 13 days × 2.00 = 26.00 (and 26.00 a month:
                       all in the last 30 days). Run "recent" (ended 20 Feb) and "live"
                       (running) have storage too: nothing.
data_far_from_gpus     run "far" (training) has GPU compute in us-west-2 and moves 150 GiB a day
                       from us-east-1 to us-west-2, 20–28 Feb, 3.00 a day: 27.00 wasted, 27.00
                       a month; the project holds 500 GiB in us-east-1 on 28 Feb: copying it at
                       the catalogue's 0.02 a GB is 10.00. Run "near" (GPUs in us-east-1) moves
                       us-east-1 → us-west-2: away from its GPUs, nothing.
vector_db_growth       vectors: 100 GiB on 29 Jan, 150 GiB on 28 Feb (50% > 20%), 3.00 that day:
                       150 − 120 = 30 GiB above the pace × 0.02 a GiB-day × 30 = 18.00 a month.
                       slow: 100 → 110 GiB (10%): nothing.
storage_spike          bucket spiky, 1.00 a day from 21 Dec, 3.00 a day 15–21 Feb (21.00 against
                       a trend of 7.00: 3x ≥ 2x): 7 × (3.00 − 1.00) = 14.00, one-off. Week 0's
                       7.00 against (21 + 7 + 7 + 7) ÷ 4 = 10.50 is no spike. bucket calm (1.00 a
                       day) and bucket mild (1.50 a day in that week): nothing.
"""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
from django.core.management import call_command

from apps.accounts.models import Organization
from apps.billing.models import CostKind, CostLineItem, DailyStorageCost, Delivery
from apps.billing.storage import DataClass, UsageClass
from apps.experiments.models import Experiment
from apps.insights.models import Finding, FindingHour, InsightsSettings, Kind, StorageEgressPrice
from apps.insights.selectors import waste_totals
from apps.insights.services import findings_recompute
from tests.factories import ExperimentFactory

pytestmark = pytest.mark.django_db

GIB = Decimal(2**30)
DAY = Decimal(86400)
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
        billing_period_start=at("2025-02-01 00:00"),
        billing_period_end=at("2025-03-01 00:00"),
        fingerprint="s" * 64,
        max_charge_period_end=at("2025-03-01 00:00"),
        max_usage_period_end=at("2025-03-01 00:00"),
    )


def stored(delivery, day: date, gib, cost, *, bucket, data_class=DataClass.DATASET, **fields):
    values = {
        "delivery": delivery,
        "day": day,
        "data_class": data_class,
        "usage_class": UsageClass.OBJECT,
        "provider_name": "AWS",
        "region_id": "us-east-1",
        "resource_id": bucket,
        "billing_currency": "USD",
        "effective_cost": Decimal(cost),
        "billed_cost": Decimal(cost),
        "stored_byte_seconds": Decimal(gib) * GIB * DAY,
        "line_items": 24,
    }
    values.update(fields)
    return DailyStorageCost.objects.create(**values)


def days(first: str, number: int) -> list[date]:
    start = date.fromisoformat(first)
    return [start + timedelta(days=i) for i in range(number)]


def weekly(delivery, first: str, sizes, *, bucket, price="0.01", **fields) -> None:
    for week, size in enumerate(sizes):
        for day in days(first, 42)[7 * week : 7 * week + 7]:
            stored(delivery, day, size, Decimal(size) * Decimal(price), bucket=bucket, **fields)


def only(kind: str) -> Finding:
    (finding,) = Finding.objects.filter(kind=kind)
    return finding


def test_checkpoints_that_only_grow_waste_their_growth_and_save_its_monthly_cost(delivery):
    weekly(
        delivery,
        "2025-01-18",
        [100, 110, 120, 130, 140, 150],
        bucket="ckpt",
        data_class=DataClass.CHECKPOINTS,
    )
    weekly(
        delivery,
        "2025-01-18",
        [100, 110, 105, 120, 130, 140],
        bucket="dip",
        data_class=DataClass.CHECKPOINTS,
    )
    weekly(delivery, "2025-01-18", [100, 110, 120, 130, 140, 150], bucket="data")
    findings_recompute()
    finding = only(Kind.CHECKPOINTS_ONLY_GROW)
    assert finding.resource_id == "ckpt"
    assert finding.wasted == {"USD": "10.5"}
    assert Decimal(finding.savings_per_month["USD"]) == (Decimal(90) / 7).quantize(Decimal("1e-15"))
    assert finding.first_seen == at("2025-01-25 00:00")
    assert finding.last_seen == at("2025-02-28 23:00")
    assert finding.evidence["weekly_bytes"] == [str(size * 2**30) for size in range(100, 151, 10)]
    assert finding.reason == (
        "Checkpoints grew every week for 6 weeks (100 GiB to 150 GiB, +42.9 GiB a month): "
        "each month of growth adds USD 12.86 a month"
    )
    # Each day's money over its 24 hours, adding up exactly.
    assert FindingHour.objects.filter(finding=finding).count() == 35 * 24


def test_the_weeks_of_checkpoint_growth_are_a_setting(delivery):
    weekly(
        delivery,
        "2025-01-18",
        [100, 110, 105, 120, 130, 140],
        bucket="dip",
        data_class=DataClass.CHECKPOINTS,
    )
    settings = InsightsSettings.get()
    settings.checkpoint_growth_weeks = 4  # 1 February on: 105, 120, 130, 140
    settings.save()
    findings_recompute()
    finding = only(Kind.CHECKPOINTS_ONLY_GROW)
    # Above 1 February's 105 GiB at 0.01: (15 + 25 + 35) GiB × 7 × 0.01 = 5.25.
    assert finding.wasted == {"USD": "5.25"}


def test_storage_of_finished_runs_counts_from_n_days_after_the_end(delivery, project):
    done = ExperimentFactory(
        project=project,
        name="done",
        status=Experiment.Status.SUCCEEDED,
        started_at=at("2025-01-20 00:00"),
        ended_at=at("2025-02-01 12:00"),
    )
    recent = ExperimentFactory(
        project=project,
        name="recent",
        status=Experiment.Status.SUCCEEDED,
        started_at=at("2025-02-10 00:00"),
        ended_at=at("2025-02-20 00:00"),
    )
    live = ExperimentFactory(
        project=project,
        name="live",
        status=Experiment.Status.RUNNING,
        started_at=at("2025-02-01 00:00"),
        ended_at=None,
    )
    for run, bucket in ((done, "done-ckpt"), (recent, "recent-ckpt"), (live, "live-ckpt")):
        for day in days("2025-02-01", 28):
            stored(
                delivery,
                day,
                200,
                "2.00",
                bucket=bucket,
                data_class=DataClass.CHECKPOINTS,
                project=project,
                experiment=run,
            )
    findings_recompute()
    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert (finding.experiment, finding.project, finding.resource_id) == (
        done,
        project,
        "done-ckpt",
    )
    assert finding.wasted == {"USD": "26"}
    assert finding.savings_per_month == {"USD": "26"}
    assert finding.first_seen == at("2025-02-16 00:00")
    assert finding.reason == (
        "Run done succeeded on 2025-02-01: 200 GiB still stored 14 days on, "
        "USD 26.00 since 2025-02-16"
    )


def test_data_far_from_the_gpus_wastes_the_egress_and_prices_the_copy(delivery, project):
    far = ExperimentFactory(project=project, name="far", region="us-west-2")
    near = ExperimentFactory(project=project, name="near", region="us-east-1")
    for run, region in ((far, "us-west-2"), (near, "us-east-1")):
        CostLineItem.objects.create(
            delivery=delivery,
            source_row=next(_rows),
            billing_account_id="111",
            billing_period_start=delivery.billing_period_start,
            billing_period_end=delivery.billing_period_end,
            charge_period_start=at("2025-02-20 00:00"),
            charge_period_end=at("2025-02-20 01:00"),
            charge_category="Usage",
            billing_currency="USD",
            billed_cost=Decimal("30"),
            effective_cost=Decimal("30"),
            service_name="Amazon Elastic Compute Cloud",
            provider_name="AWS",
            resource_id=f"i-{run.name}",
            region_id=region,
            project=project,
            experiment=run,
            workload="training",
            cost_kind=CostKind.GPU_COMPUTE,
        )
    for day in days("2025-02-20", 9):
        for run in (far, near):
            stored(
                delivery,
                day,
                0,
                "3.00",
                bucket="",
                usage_class=UsageClass.INTER_REGION,
                transfer_from="us-east-1",
                transfer_to="us-west-2",
                moved_bytes=150 * GIB,
                project=project,
                experiment=run,
            )
    stored(delivery, date(2025, 2, 28), 500, "0.50", bucket="datasets", project=project)
    StorageEgressPrice.objects.create(
        provider="aws",
        service="ec2/s3",
        item="egress_inter_region",
        region="us-east-1 -> us-west-2",
        volume_tier="all volumes",
        unit="GB",
        price=Decimal("0.02"),
        source="storage_egress_prices.csv row 8",
        as_of=date(2026, 1, 1),
    )
    findings_recompute()
    finding = only(Kind.DATA_FAR_FROM_GPUS)
    assert finding.experiment == far
    assert finding.wasted == {"USD": "27"}
    assert finding.savings_per_month == {"USD": "27"}
    (pair,) = finding.evidence["pairs"]
    assert pair["bytes"] == str(9 * 150 * 2**30)
    assert pair["copy"] == {
        "bytes": str(500 * 2**30),
        "price_per_gb": "0.02",
        "cost": "10",
        "source": "storage_egress_prices.csv row 8",
    }
    assert finding.reason == (
        "far trains in us-west-2 on data from us-east-1: USD 27.00 of egress in the last 30 "
        "days; copying its 500 GiB there once: USD 10.00"
    )


def test_no_catalogue_price_in_the_bills_currency_is_said(delivery, project):
    far = ExperimentFactory(project=project, name="far", region="us-west-2")
    stored(
        delivery,
        date(2025, 2, 28),
        0,
        "3.00",
        bucket="",
        usage_class=UsageClass.INTER_REGION,
        transfer_from="us-east-1",
        transfer_to="us-west-2",
        moved_bytes=150 * GIB,
        project=project,
        experiment=far,
        billing_currency="EUR",
    )
    StorageEgressPrice.objects.create(
        provider="aws",
        service="ec2/s3",
        item="egress_inter_region",
        region="us-east-1 -> us-west-2",
        unit="GB",
        price=Decimal("0.02"),
        source="csv",
        as_of=date(2026, 1, 1),
    )
    findings_recompute()
    finding = only(Kind.DATA_FAR_FROM_GPUS)
    assert finding.wasted == {"EUR": "3"}
    assert finding.evidence["pairs"][0]["copy"] == {"bytes": "0", "note": "no price in EUR"}


def test_a_vector_database_growing_faster_than_the_rate_saves_the_excess(delivery):
    for bucket, now in (("vectors", 150), ("slow", 110)):
        kind = {"data_class": DataClass.VECTOR_DB, "usage_class": UsageClass.VECTOR_DB}
        stored(delivery, date(2025, 1, 29), 100, "2.00", bucket=bucket, **kind)
        stored(delivery, date(2025, 2, 28), now, Decimal(now) / 50, bucket=bucket, **kind)
    findings_recompute()
    finding = only(Kind.VECTOR_DB_GROWTH)
    assert finding.resource_id == "vectors"
    assert finding.wasted == {}
    assert finding.savings_per_month == {"USD": "18"}
    assert finding.reason == (
        "Vector database grew 50.0% in 30 days (limit 20% a month): 30.0 GiB above that pace "
        "cost USD 18.00 a month"
    )
    settings = InsightsSettings.get()
    settings.vector_db_growth_percent_per_month = Decimal("60")
    settings.save()
    findings_recompute()
    assert only(Kind.VECTOR_DB_GROWTH).status == "gone"


def test_a_storage_spike_wastes_what_is_above_the_trend_once(delivery):
    for bucket, spike in (("spiky", "3.00"), ("calm", "1.00"), ("mild", "1.50")):
        for day in days("2024-12-21", 70):
            cost = spike if date(2025, 2, 15) <= day <= date(2025, 2, 21) else "1.00"
            stored(delivery, day, 10, cost, bucket=bucket)
    findings_recompute()
    finding = only(Kind.STORAGE_SPIKE)
    assert finding.resource_id == "spiky"
    assert finding.wasted == {"USD": "14"}
    assert finding.savings_per_month == {}  # one-off
    assert finding.evidence["spikes"] == [
        {"week_start": "2025-02-15", "spend": "21", "trend": "7", "times_trend": "3"}
    ]
    assert (finding.first_seen, finding.last_seen) == (
        at("2025-02-15 00:00"),
        at("2025-02-21 23:00"),
    )
    assert finding.reason == "Storage the week of 2025-02-15 was 3x its trend: USD 14.00 above it"


def test_a_failed_runs_storage_counts_once_against_failed_run(delivery, project):
    crashed = ExperimentFactory(
        project=project,
        name="crashed",
        status=Experiment.Status.FAILED,
        started_at=at("2025-01-01 00:00"),
        ended_at=at("2025-01-01 12:00"),
    )
    for day in days("2025-02-20", 9):
        start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
        CostLineItem.objects.create(
            delivery=delivery,
            source_row=next(_rows),
            billing_account_id="111",
            billing_period_start=delivery.billing_period_start,
            billing_period_end=delivery.billing_period_end,
            charge_period_start=start,
            charge_period_end=start + timedelta(days=1),
            charge_category="Usage",
            billing_currency="USD",
            billed_cost=Decimal("2.40"),
            effective_cost=Decimal("2.40"),
            service_name="Amazon Simple Storage Service",
            provider_name="AWS",
            resource_id="crashed-ckpt",
            project=project,
            experiment=crashed,
            workload="training",
            cost_kind=CostKind.STORAGE,
        )
        stored(
            delivery,
            day,
            100,
            "2.40",
            bucket="crashed-ckpt",
            data_class=DataClass.CHECKPOINTS,
            project=project,
            experiment=crashed,
        )
    findings_recompute()
    assert only(Kind.FAILED_RUN).wasted == {"USD": "21.6"}
    assert only(Kind.STORAGE_OF_FINISHED_RUNS).wasted == {"USD": "21.6"}
    totals = waste_totals(findings=Finding.objects.all(), start=None, end=None, today=date.today())
    assert totals.wasted == {"USD": Decimal("21.6")}


def test_the_storage_kinds_join_the_findings_command(delivery, capsys):
    for day in days("2024-12-21", 70):
        cost = "3.00" if date(2025, 2, 15) <= day <= date(2025, 2, 21) else "1.00"
        stored(delivery, day, 10, cost, bucket="spiky")
    findings_recompute()
    capsys.readouterr()
    call_command("findings", "--json", "--kind", "storage_spike")
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert '"kind": "storage_spike"' in line
    assert '"wasted": {"USD": "14"}' in line


@pytest.fixture
def storage_bill(delivery, project):
    """One finding of each storage kind, all of the lead's project."""
    mine = {"project": project}
    weekly(
        delivery,
        "2025-01-18",
        [100, 110, 120, 130, 140, 150],
        bucket="ckpt",
        data_class=DataClass.CHECKPOINTS,
        **mine,
    )
    done = ExperimentFactory(
        project=project,
        name="done",
        started_at=at("2025-01-20 00:00"),
        ended_at=at("2025-02-01 12:00"),
    )
    far = ExperimentFactory(project=project, name="far", region="us-west-2", ended_at=None)
    for day in days("2025-02-01", 28):
        stored(delivery, day, 200, "2.00", bucket="done-ckpt", experiment=done, **mine)
        stored(
            delivery,
            day,
            0,
            "3.00",
            bucket="",
            usage_class=UsageClass.INTER_REGION,
            transfer_from="us-east-1",
            transfer_to="us-west-2",
            moved_bytes=150 * GIB,
            experiment=far,
            **mine,
        )
    vector = {"data_class": DataClass.VECTOR_DB, "usage_class": UsageClass.VECTOR_DB, **mine}
    stored(delivery, date(2025, 1, 29), 100, "2.00", bucket="vectors", **vector)
    stored(delivery, date(2025, 2, 28), 150, "3.00", bucket="vectors", **vector)
    for day in days("2024-12-21", 70):
        cost = "3.00" if date(2025, 2, 15) <= day <= date(2025, 2, 21) else "1.00"
        stored(delivery, day, 10, cost, bucket="spiky", **mine)
    findings_recompute()
    return {finding.kind: finding for finding in Finding.objects.all()}


STORAGE_PAGES = {
    Kind.CHECKPOINTS_ONLY_GROW: ('id="storage-facts"', "100 GiB → 110 GiB → 120 GiB"),
    Kind.STORAGE_OF_FINISHED_RUNS: ('id="storage-buckets"', "done-ckpt"),
    Kind.DATA_FAR_FROM_GPUS: ('id="region-pairs"', "the bill&#x27;s own rate"),
    Kind.VECTOR_DB_GROWTH: ('id="storage-facts"', "50.0% against a limit of 20%"),
    Kind.STORAGE_SPIKE: ('id="storage-spikes"', "3x (limit 2x)"),
}


def test_each_storage_finding_is_filtered_on_the_waste_page_and_shows_its_evidence(
    storage_bill, lead
):
    from django.test import Client

    assert set(storage_bill) >= set(STORAGE_PAGES)
    client = Client()
    client.force_login(lead)
    for kind, (element, text) in STORAGE_PAGES.items():
        finding = storage_bill[kind]
        listed = client.get("/waste/", {"kind": kind, "status": "", "period": "all"})
        assert listed.status_code == 200
        assert listed.content.decode().count('<tr id="finding-') == 1, kind
        assert f'id="finding-{finding.pk}"' in listed.content.decode()
        page = client.get(f"/waste/{finding.pk}/")
        body = page.content.decode()
        assert page.status_code == 200
        assert element in body and text in body, kind
        # A chart of the days where the kind keeps them; data far from the GPUs is its table.
        assert ('id="evidence-chart"' in body) is (kind != Kind.DATA_FAR_FROM_GPUS), kind


def test_without_a_catalogue_price_the_copy_is_priced_at_the_bills_own_rate(delivery, project):
    far = ExperimentFactory(project=project, name="far", region="us-west-2")
    for day in days("2025-02-20", 9):
        stored(
            delivery,
            day,
            0,
            "3.00",
            bucket="",
            usage_class=UsageClass.INTER_REGION,
            transfer_from="us-east-1",
            transfer_to="us-west-2",
            moved_bytes=150 * GIB,
            project=project,
            experiment=far,
        )
    stored(delivery, date(2025, 2, 28), 500, "0.50", bucket="datasets", project=project)
    findings_recompute()
    # 27.00 for 1,350 GiB moved: 0.02 a GiB; 500 GiB × 0.02 = 10.00.
    assert only(Kind.DATA_FAR_FROM_GPUS).evidence["pairs"][0]["copy"] == {
        "bytes": str(500 * 2**30),
        "price_per_gb": "0.02",
        "cost": "10",
        "source": "the bill's own rate for this pair (no catalogue price)",
    }


def finished_with_checkpoints(delivery, project, name: str, *, ended: str, days_stored: int):
    """A run that succeeded (started 1 January 2025), its checkpoints stored from 1 February at
    100 GiB for USD 1.00 a day."""
    run = ExperimentFactory(
        project=project,
        name=name,
        status=Experiment.Status.SUCCEEDED,
        started_at=at("2025-01-01 00:00"),
        ended_at=at(ended),
    )
    for day in days("2025-02-01", days_stored):
        stored(
            delivery,
            day,
            100,
            "1.00",
            bucket=f"{name}-ckpt",
            data_class=DataClass.CHECKPOINTS,
            project=project,
            experiment=run,
        )
    return run


def finding_rows() -> list[tuple]:
    return list(
        Finding.objects.order_by("pk").values_list(
            "pk", "updated_at", "wasted", "reason", "evidence"
        )
    )


def test_a_narrowed_recompute_reads_only_the_runs_with_storage_in_its_period(delivery, project):
    """A recompute of changed days (services._narrowed) reads the finished runs with storage on
    those days only, each over its whole life, and leaves what a whole recompute gives."""
    finished_with_checkpoints(delivery, project, "kept", ended="2025-01-10 00:00", days_stored=28)
    finished_with_checkpoints(delivery, project, "gone", ended="2025-01-05 00:00", days_stored=10)
    findings_recompute()
    findings = {
        f.experiment.name: f for f in Finding.objects.filter(kind=Kind.STORAGE_OF_FINISHED_RUNS)
    }
    assert {name: f.wasted for name, f in findings.items()} == {
        "kept": {"USD": "28"},
        "gone": {"USD": "10"},
    }
    changed = DailyStorageCost.objects.filter(resource_id="kept-ckpt", day=date(2025, 2, 20))
    assert changed.update(effective_cost=Decimal("3.00")) == 1

    run = findings_recompute(start=date(2025, 2, 20), end=date(2025, 2, 21))

    assert run.summary["narrowed"] is True
    assert run.summary["kinds"][Kind.STORAGE_OF_FINISHED_RUNS]["subjects"] == 1  # "kept"
    kept, gone = (Finding.objects.get(pk=findings[name].pk) for name in ("kept", "gone"))
    assert kept.wasted == {"USD": "30"}
    assert (gone.wasted, gone.updated_at) == ({"USD": "10"}, findings["gone"].updated_at)
    narrowed = finding_rows()
    findings_recompute()
    assert finding_rows() == narrowed


def test_a_narrowed_recompute_refreshes_a_run_whose_storage_left_the_period(delivery, project):
    """Its hours there are deleted and its finding refreshed from its subject (its reason and
    evidence as a whole recompute gives them), though it has no storage in the period any more."""
    finished_with_checkpoints(delivery, project, "kept", ended="2025-01-10 00:00", days_stored=28)
    findings_recompute()
    reason = only(Kind.STORAGE_OF_FINISHED_RUNS).reason
    assert reason.startswith("Run kept succeeded on 2025-01-10")
    moved = DailyStorageCost.objects.filter(resource_id="kept-ckpt", day=date(2025, 2, 20))
    assert moved.update(experiment=None) == 1  # re-attributed away from the run

    summary = findings_recompute(start=date(2025, 2, 20), end=date(2025, 2, 21)).summary

    assert summary["narrowed"] is True
    counts = summary["kinds"][Kind.STORAGE_OF_FINISHED_RUNS]
    assert (counts["subjects"], counts["hours_deleted"]) == (1, 24)
    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert finding.wasted == {"USD": "27"}
    assert finding.reason.startswith("Run kept succeeded on 2025-01-10")
    narrowed = finding_rows()
    findings_recompute()
    assert finding_rows() == narrowed


def ended_1_september(project, name: str, status=Experiment.Status.SUCCEEDED) -> Experiment:
    """A run of August 2024, ended on 1 September at 12:00: with the default 14 days of grace,
    its storage counts from 16 September."""
    return ExperimentFactory(
        project=project,
        name=name,
        status=status,
        started_at=at("2024-08-01 00:00"),
        ended_at=at("2024-09-01 12:00"),
    )


def test_a_finished_runs_finding_sums_its_whole_life_and_shows_its_last_120_days(delivery, project):
    """Its totals are its whole life since the grace, its evidence the last 120 days with
    storage (of every bucket), what it still stores that of its latest day, and a narrowed
    recompute of one day leaves what a whole one gives (the days before the evidence's are read
    only as sums)."""
    run = ended_1_september(project, "archive")
    # From 10 September (six days before the grace ends: not counted), 150 days of 100 GiB at
    # USD 1.00; and 20 days of a second bucket from 16 September, at USD 0.50 under two owners.
    for day in days("2024-09-10", 150):
        stored(delivery, day, 100, "1.00", bucket="long-ckpt", project=project, experiment=run)
    for day in days("2024-09-16", 20):
        for owner in (project, None):
            stored(delivery, day, 25, "0.25", bucket="early-ckpt", project=owner, experiment=run)
    findings_recompute()

    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert finding.wasted == {"USD": "154"}  # 144 days of 1.00 and 20 of 0.50
    assert finding.resource_id == "long-ckpt"
    # Still stored: the long bucket's 100 GiB on the latest day, not the early one's last 50.
    assert finding.reason == (
        "Run archive succeeded on 2024-09-01: 100 GiB still stored 14 days on, "
        "USD 154.00 since 2024-09-16"
    )
    assert finding.evidence["buckets"] == [
        {"bucket": "long-ckpt", "spend": "144"},
        {"bucket": "early-ckpt", "spend": "10"},
    ]
    shown = finding.evidence["storage_days"]
    assert len(shown) == 120
    assert shown[0][:2] == ["2024-10-10", "USD"] and shown[-1][:2] == ["2025-02-06", "USD"]
    assert shown[-1][3:] == ["1", "1"]  # spend and wasted of the last day
    whole = finding_rows()
    findings_recompute(start=date(2025, 1, 20), end=date(2025, 1, 21))
    assert finding_rows()[0][2:] == whole[0][2:]


def test_a_finished_runs_last_120_days_with_storage_skip_the_days_without(delivery, project):
    """A bucket not billed for ten days: its last 120 days with storage reach back 130 days
    (read ranked: its last 120 calendar days hold only 110 of them)."""
    run = ended_1_september(project, "gapped", Experiment.Status.FAILED)
    billed = days("2024-09-16", 150)
    del billed[100:110]  # 25 December 2024 to 3 January 2025
    for day in billed:
        stored(delivery, day, 100, "1.00", bucket="ckpt", project=project, experiment=run)
    findings_recompute()

    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert finding.wasted == {"USD": "140"}
    shown = finding.evidence["storage_days"]
    assert len(shown) == 120
    assert shown[0][:2] == ["2024-10-06", "USD"] and shown[-1][:2] == ["2025-02-12", "USD"]
    assert ["2024-12-25", "USD"] not in [row[:2] for row in shown]


def test_a_months_recompute_reads_the_other_months_as_the_last_recompute_left_them(
    delivery, project
):
    """November's bill changes and only November is recomputed; January's recompute then reads
    November from the findings' day rollup (not as hours: outside its period and its 30 days),
    which November's recompute rebuilt: what a whole recompute gives."""
    run = ended_1_september(project, "kept")
    for day in days("2024-09-16", 150):
        stored(delivery, day, 100, "1.00", bucket="ckpt", project=project, experiment=run)
    findings_recompute()
    assert only(Kind.STORAGE_OF_FINISHED_RUNS).wasted == {"USD": "150"}

    stored(delivery, date(2024, 11, 5), 10, "5.00", bucket="late", project=None, experiment=run)
    findings_recompute(start=date(2024, 11, 1), end=date(2024, 12, 1))
    findings_recompute(start=date(2025, 1, 1), end=date(2025, 2, 1))

    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert finding.wasted == {"USD": "155"}
    assert finding.project_id == project.pk  # 150.00 against the late bucket's 5.00 unset
    assert finding.evidence["billed_hours"] == 150 * 24
    months = finding_rows()
    findings_recompute()
    assert finding_rows()[0][2:] == months[0][2:]


def test_a_runs_storage_counts_from_the_day_its_grace_ends_at_midnight(delivery, project):
    """Ended at 00:00, 14 days of grace end at midnight: that day is the first counted, both
    where the finding's sums are read (in SQL) and where its reason names it."""
    run = finished_with_checkpoints(
        delivery, project, "midnight", ended="2025-01-18 00:00", days_stored=10
    )
    assert run.ended_at + timedelta(days=14) == at("2025-02-01 00:00")
    findings_recompute()

    finding = only(Kind.STORAGE_OF_FINISHED_RUNS)
    assert finding.wasted == {"USD": "10"}  # 1 to 10 February, each 1.00
    assert finding.reason.endswith("USD 10.00 since 2025-02-01")
