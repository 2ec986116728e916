"""Part 2's findings on small hand-built bills and metrics (10 March 2025, a Monday; USD; the
organisation in UTC), with the figures worked out by hand in each test's docstring."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.billing.loader import rollups_rebuild
from apps.billing.models import CostLineItem
from apps.experiments.models import Experiment
from apps.gpu.models import Gpu, GpuHour
from apps.insights.models import (
    Finding,
    FindingHour,
    GpuInstancePrice,
    GpuTypeMemory,
    InsightsSettings,
    Kind,
)
from apps.insights.selectors import waste_totals
from apps.insights.services import findings_recompute
from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    StaffFactory,
)

from .conftest import at, line

pytestmark = pytest.mark.django_db

DAY = "2025-03-10"


def hour_at(number: int) -> datetime:
    return at(f"{DAY} 00:00") + timedelta(hours=number)


def hourly_lines(delivery, resource, hours, cost, *, project=None, workload=None, **fields):
    """One GPU-compute line per hour (hour numbers on the 10th), each `cost`."""
    made = []
    for number in hours:
        item = line(
            delivery,
            hour_at(number).strftime("%Y-%m-%d %H:%M"),
            hour_at(number + 1).strftime("%Y-%m-%d %H:%M"),
            cost,
            resource=resource,
            project=project,
        )
        made.append(item.pk)
    updates = dict(fields)
    if workload:
        updates["workload"] = workload
    if updates:
        CostLineItem.objects.filter(pk__in=made).update(**updates)
    return made


def gpu(name: str, resource: str) -> Gpu:
    return Gpu.objects.create(uuid=f"GPU-{name}", host=f"host-{name}", resource_label=resource)


def measure(gpu: Gpu, number: int, *, idle: int = 0, samples: int = 60, util=None, memory=None):
    """The GPU's hour `number` of the 10th: `idle` of `samples` under the threshold; the mean
    utilisation given (else 80% of the busy share); peak memory in MiB."""
    return GpuHour.objects.create(
        gpu=gpu,
        hour=hour_at(number),
        samples=samples,
        util_samples=samples,
        idle_share=idle / samples,
        util_mean=util if util is not None else 80.0 * (samples - idle) / samples,
        util_max=util,
        memory_used_max_mib=memory,
        memory_used_mib=memory,
    )


def recompute(delivery):
    rollups_rebuild(delivery_id=delivery.pk)
    run = findings_recompute()
    assert run.status == "succeeded", run.error
    return run


def finding(kind: str, key: str) -> Finding:
    return Finding.objects.get(kind=kind, subject_key=key)


def notebook_run(project, resource, *, started=0, ended=None):
    run = ExperimentFactory(
        project=project,
        kind=Experiment.Kind.NOTEBOOK,
        status=Experiment.Status.RUNNING if ended is None else Experiment.Status.STOPPED,
        started_at=hour_at(started),
        ended_at=hour_at(ended) if ended is not None else None,
        gpu_count=1,
    )
    ExperimentResourceFactory(experiment=run, resource_id=resource)
    return run


# -- notebook_left_running ----------------------------------------------------------------------


def test_notebook_left_running_counts_the_stretches_of_idle_hours(organization, delivery, project):
    """Billed 00:00-19:00 at 0.50 an hour. 00:00 busy; 01:00-10:00 idle (05:00 exactly 90%):
    a stretch of 10 hours >= 8 -> 10 × 0.50 = 5.00. 11:00 unmeasured ends it; 12:00-18:00 idle
    is 7 hours: too short. Wasted 5.00; savings (the last 30 days) 5.00."""
    notebook_run(project, "nb-1")
    hourly_lines(delivery, "nb-1", range(19), "0.50", project=project, workload="development")
    card = gpu("n1", "nb-1")
    measure(card, 0, idle=0)
    for number in [*range(1, 11), *range(12, 19)]:
        measure(card, number, idle=54 if number == 5 else 60)
    recompute(delivery)
    found = finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-1")
    assert found.wasted == {"USD": "5"}
    assert found.savings_per_month == {"USD": "5"}
    assert (found.first_seen, found.last_seen) == (hour_at(1), hour_at(10))
    assert found.reason == "GPU idle since Monday 10 Mar 01:00, 10 hours (USD 5.00)"
    assert found.evidence["stretches"] == [
        {"start": "2025-03-10T01:00:00+00:00", "end": "2025-03-10T11:00:00+00:00", "hours": 10}
    ]
    wasted = dict(
        FindingHour.objects.filter(finding=found, wasted__gt=0).values_list("hour", "wasted")
    )
    assert sorted(wasted) == [hour_at(number) for number in range(1, 11)]
    assert set(wasted.values()) == {Decimal("0.5")}


def test_notebook_hours_setting_changes_what_a_stretch_is(organization, delivery, project):
    """With N = 7 the 12:00-18:00 stretch (7 hours × 0.50) counts too: 5.00 + 3.50 = 8.50."""
    notebook_run(project, "nb-1")
    hourly_lines(delivery, "nb-1", range(19), "0.50", project=project, workload="development")
    card = gpu("n1", "nb-1")
    for number in [*range(1, 11), *range(12, 19)]:
        measure(card, number, idle=60)
    settings = InsightsSettings.get()
    settings.notebook_idle_hours = 7
    settings.save()
    recompute(delivery)
    found = finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-1")
    assert found.wasted == {"USD": "8.5"}
    assert found.reason == (
        "GPU idle since Monday 10 Mar 12:00, 7 hours (2 idle stretches, 17 hours, USD 8.50 in all)"
    )


def test_a_notebook_closed_after_an_hour_is_no_finding(organization, delivery, project):
    notebook_run(project, "nb-2", ended=1)
    hourly_lines(delivery, "nb-2", [0], "0.50", project=project, workload="development")
    measure(gpu("n2", "nb-2"), 0, idle=60)
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.NOTEBOOK_LEFT_RUNNING).exists()


def test_a_notebook_busy_at_night_is_no_finding(organization, delivery, project):
    """Idle 7 hours, busy 1, idle 7, busy 1, ...: never 8 idle hours in a row."""
    notebook_run(project, "nb-3")
    hourly_lines(delivery, "nb-3", range(24), "0.50", project=project, workload="development")
    card = gpu("n3", "nb-3")
    for number in range(24):
        measure(card, number, idle=0 if number % 8 == 7 else 60)
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.NOTEBOOK_LEFT_RUNNING).exists()


def test_a_stretch_across_a_period_boundary_is_seen_whole(organization, delivery, project):
    """A period recompute of the 11th alone still sees the stretch that began on the 10th."""
    from datetime import date

    notebook_run(project, "nb-4")
    hourly_lines(delivery, "nb-4", range(18, 30), "1.00", project=project, workload="development")
    card = gpu("n4", "nb-4")
    for number in range(18, 30):
        measure(card, number, idle=60)
    recompute(delivery)
    assert finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-4").wasted == {"USD": "12"}
    findings_recompute(start=date(2025, 3, 11), end=date(2025, 3, 12))
    found = finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-4")
    assert found.wasted == {"USD": "12"}
    assert found.reason == "GPU idle since Monday 10 Mar 18:00, 12 hours (USD 12.00)"


# -- idle_between_runs --------------------------------------------------------------------------


def test_idle_between_runs_counts_the_hours_no_run_used(organization, delivery, project):
    """Billed 00:00-12:00 at 2.00. Run A 00:00-03:00, run B 05:30-08:00 (05:00 half used: used),
    deployment D's use 10:00-11:00. Gaps 03:00-05:00, 08:00-10:00, 11:00-12:00: 5 hours × 2.00
    = 10.00 in 3 gaps."""
    a = ExperimentFactory(project=project, started_at=hour_at(0), ended_at=hour_at(3))
    b = ExperimentFactory(
        project=project, started_at=hour_at(5) + timedelta(minutes=30), ended_at=hour_at(8)
    )
    ExperimentResourceFactory(experiment=a, resource_id="i-runs")
    ExperimentResourceFactory(experiment=b, resource_id="i-runs")
    serving = DeploymentFactory(project=project, started_at=hour_at(0))
    DeploymentResourceFactory(
        deployment=serving, resource_id="i-runs", started_at=hour_at(10), ended_at=hour_at(11)
    )
    hourly_lines(delivery, "i-runs", range(12), "2.00", project=project)
    recompute(delivery)
    found = finding(Kind.IDLE_BETWEEN_RUNS, "i-runs")
    assert found.wasted == {"USD": "10"}
    wasted_hours = sorted(
        FindingHour.objects.filter(finding=found, wasted__gt=0).values_list("hour", flat=True)
    )
    assert wasted_hours == [hour_at(n) for n in (3, 4, 8, 9, 11)]
    assert found.evidence["gaps_count"] == 3
    assert [gap["hours"] for gap in found.evidence["gaps"]] == [2, 2, 1]
    assert [run["name"] for run in found.evidence["runs"]] == [a.name, b.name, serving.name]
    assert found.reason == (
        "Billed 5 hours with no registered run using it, in 3 gaps between runs (USD 10.00)"
    )


def test_back_to_back_and_overlapping_runs_leave_no_gap(organization, delivery, project):
    for resource, windows in {
        "i-back": [(0, 6), (6, 12)],
        "i-overlap": [(0, 7), (5, 12)],
    }.items():
        for first, last in windows:
            run = ExperimentFactory(
                project=project, started_at=hour_at(first), ended_at=hour_at(last)
            )
            ExperimentResourceFactory(experiment=run, resource_id=resource)
        hourly_lines(delivery, resource, range(12), "2.00", project=project)
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.IDLE_BETWEEN_RUNS).exists()


def test_the_deployment_page_shows_its_idle_time_between_runs(
    organization, delivery, project, client, lead
):
    """A deployment's use 00:00-04:00 and 06:00-08:00 (lines in them attributed to it): 04:00 and
    05:00 between, 2 × 3.00 = 6.00, attributed to the deployment."""
    serving = DeploymentFactory(project=project, started_at=hour_at(0))
    for first, last in [(0, 4), (6, 8)]:
        DeploymentResourceFactory(
            deployment=serving,
            resource_id="i-serve",
            started_at=hour_at(first),
            ended_at=hour_at(last),
        )
    used = hourly_lines(delivery, "i-serve", [0, 1, 2, 3, 6, 7], "3.00", project=project)
    CostLineItem.objects.filter(pk__in=used).update(deployment=serving, workload="inference")
    hourly_lines(delivery, "i-serve", [4, 5], "3.00", project=project)
    recompute(delivery)
    found = finding(Kind.IDLE_BETWEEN_RUNS, "i-serve")
    assert found.wasted == {"USD": "6"}
    assert found.deployment == serving
    client.force_login(lead)
    page = client.get(
        reverse("deployment_detail", args=[serving.pk]), {"start": DAY, "end": "2025-03-11"}
    )
    assert page.status_code == 200
    assert found.reason in page.content.decode()


# -- data_starved -------------------------------------------------------------------------------


def starved_run(project, delivery, utilisation):
    """A training run 00:00-02:00 on i-ds1 (GPUs a, b) and i-ds2 (GPU c): i-ds1 billed 4.00 an
    hour, i-ds2 one line 00:00-02:00 of 12.00 -> GPU-compute cost 20.00. `utilisation`:
    GPU name -> [(hour, samples, mean)]."""
    run = ExperimentFactory(
        project=project, name="loader-bound", started_at=hour_at(0), ended_at=hour_at(2)
    )
    ExperimentResourceFactory(experiment=run, resource_id="i-ds1")
    ExperimentResourceFactory(experiment=run, resource_id="i-ds2")
    ids = hourly_lines(delivery, "i-ds1", [0, 1], "4.00", project=project)
    ids.append(
        line(
            delivery, f"{DAY} 00:00", f"{DAY} 02:00", "12.00", resource="i-ds2", project=project
        ).pk
    )
    CostLineItem.objects.filter(pk__in=ids).update(experiment=run)
    cards = {"a": gpu("a", "i-ds1"), "b": gpu("b", "i-ds1"), "c": gpu("c", "i-ds2")}
    for name, hours in utilisation.items():
        for number, samples, mean in hours:
            measure(cards[name], number, samples=samples, util=mean, idle=0)
    return run


def test_data_starved_wastes_the_cost_times_the_shortfall(organization, delivery, project, client):
    """Samples-weighted mean while it ran: a (00, 60, 10%), (01, 60, 30%); b (00, 30, 40%),
    (01, 90, 10%); c (00, 60, 20%), (01, 60, 20%); a's 03:00 (after the run) at 100% is not
    counted. (600 + 1800 + 1200 + 900 + 1200 + 1200) / 360 = 19.1666... -> 19.1667%.
    Wasted = 20.00 × (1 − 19.1667 / 40) = 20.00 × 0.5208325 = 10.41665."""
    run = starved_run(
        project,
        delivery,
        {
            "a": [(0, 60, 10.0), (1, 60, 30.0), (3, 60, 100.0)],
            "b": [(0, 30, 40.0), (1, 90, 10.0)],
            "c": [(0, 60, 20.0), (1, 60, 20.0)],
        },
    )
    recompute(delivery)
    found = finding(Kind.DATA_STARVED, f"experiment:{run.pk}")
    assert found.wasted == {"USD": "10.41665"}
    assert found.experiment == run
    assert found.evidence["mean_utilisation_percent"] == "19.1667"
    assert found.evidence["target_percent"] == "40"
    assert found.evidence["gpus"] == 3
    assert found.reason.startswith("GPUs 19.2% busy on average while the run ran, under the 40%")
    assert "a GPU waiting on data is the most expensive idle resource you own" in found.reason
    line_keys = set(FindingHour.objects.filter(finding=found).values_list("line_key", flat=True))
    assert line_keys == {"i-ds1", "i-ds2"}
    client.force_login(StaffFactory())
    page = client.get(
        reverse("experiment_detail", args=[run.pk]), {"start": DAY, "end": "2025-03-11"}
    )
    assert "GPUs 19.2% busy on average" in page.content.decode()
    detail = client.get(reverse("finding_detail", args=[found.pk])).content.decode()
    assert "against a target of 40%" in detail
    assert "evidence-chart" in detail


def test_a_run_at_the_target_is_not_data_starved(organization, delivery, project):
    starved_run(
        project,
        delivery,
        {"a": [(0, 60, 40.0), (1, 60, 40.0)], "c": [(0, 60, 30.0), (1, 60, 50.0)]},
    )
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.DATA_STARVED).exists()


# -- right_size ---------------------------------------------------------------------------------


def catalogue():
    GpuInstancePrice.objects.all().delete()
    GpuTypeMemory.objects.all().delete()
    source = {"source": "test", "as_of": "2025-03-01"}
    for gpu_type, memory in [("A10G", "24"), ("L4", "24"), ("T4", "16")]:
        GpuTypeMemory.objects.create(gpu_type=gpu_type, memory_gb=memory, vendor="NVIDIA", **source)
    for itype, gpu_type, count, region, price in [
        ("g5.12xlarge", "A10G", 4, "us-east-1", "5.672"),
        ("g5.xlarge", "A10G", 1, "us-east-1", "1.006"),
        ("g6.12xlarge", "L4", 4, "us-east-1", "4.602"),
        ("g4dn.12xlarge", "T4", 4, "us-east-1", "3.912"),
        ("g4dn.12xlarge", "T4", 4, "eu-west-1", "3.0"),
    ]:
        GpuInstancePrice.objects.create(
            provider="aws",
            instance_type=itype,
            gpu_type=gpu_type,
            gpu_count=count,
            region=region,
            on_demand_per_hour=Decimal(price),
            **source,
        )


def right_size_box(delivery, project, memories, utils, *, region="us-east-1"):
    """i-rs, a g5.12xlarge (4 × A10G, 5.672 an hour) billed 00:00-10:00; its four GPUs' peak
    memory (MiB) and hourly mean utilisation in each hour."""
    catalogue()
    hourly_lines(
        delivery,
        "i-rs",
        range(10),
        "5.672",
        project=project,
        instance_type="g5.12xlarge",
        provider_name="AWS",
        region_id=region,
    )
    delivery.max_charge_period_end = hour_at(10)
    delivery.save()
    for index, (memory, util) in enumerate(zip(memories, utils, strict=True)):
        card = gpu(f"rs{index}", "i-rs")
        for number in range(10):
            measure(card, number, util=util if number == 4 else util / 2, memory=memory)


def test_right_size_picks_the_cheapest_instance_that_fits(organization, delivery, project, client):
    """Peaks 8000, 6000, 5000, 4000 MiB (one GPU 8.388608 GB, all 24.117248 GB), utilisation
    at most 40% -> at least ⌈4 × 40 / 100⌉ = 2 GPUs, each >= 8.388608 × 1.2 = 10.07 GB, all >=
    28.94 GB. g5.xlarge has 1 GPU; g6.12xlarge (4.602) and g4dn.12xlarge (3.912, 4 × 16 GB) fit;
    eu-west-1's cheaper one is not offered. Savings = (5.672 − 3.912) × 10 hours = 17.60."""
    right_size_box(delivery, project, [8000, 6000, 5000, 4000], [40.0, 20.0, 10.0, 10.0])
    recompute(delivery)
    found = finding(Kind.RIGHT_SIZE, "i-rs")
    assert found.wasted == {}
    assert found.savings_per_month == {"USD": "17.6"}
    evidence = found.evidence
    assert [c["instance_type"] for c in evidence["candidates"]] == ["g4dn.12xlarge", "g6.12xlarge"]
    assert [c["saving_per_month"] for c in evidence["candidates"]] == ["17.6", "10.7"]
    assert evidence["gpus_needed"] == 2
    assert evidence["peak_memory_gb"] == "8.39"
    assert evidence["billed_hours_30d"] == 10
    assert found.reason == (
        "Peak 8.39 GB and 40% busy fit g4dn.12xlarge (4 × T4) instead of g5.12xlarge "
        "(4 × A10G): USD 17.60 a month less"
    )
    totals = waste_totals(
        findings=Finding.objects.all(), start=None, end=None, today=hour_at(0).date()
    )
    assert totals.wasted == {}
    assert totals.savings_per_month == {"USD": Decimal("17.6")}
    client.force_login(StaffFactory())
    detail = client.get(reverse("finding_detail", args=[found.pk])).content.decode()
    assert "evidence-candidates" in detail and "g4dn.12xlarge" in detail


def test_right_size_leaves_a_gpu_that_needs_its_memory(organization, delivery, project):
    """One GPU peaks at 20000 MiB = 20.97 GB; × 1.2 = 25.2 GB: no 24 or 16 GB GPU holds it."""
    right_size_box(delivery, project, [20000, 1000, 1000, 1000], [10.0, 10.0, 10.0, 10.0])
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.RIGHT_SIZE).exists()


def test_right_size_never_offers_another_region(organization, delivery, project):
    """Peaks 17000 MiB on each GPU (17.83 GB; × 1.2 = 21.4 GB: no T4) and 100% busy (all 4 GPUs
    needed): in us-east-1 only a 4 × L4 would fit, and it is offered in eu-west-1 only."""
    right_size_box(delivery, project, [17000] * 4, [100.0, 90.0, 90.0, 90.0])
    GpuInstancePrice.objects.filter(instance_type="g6.12xlarge").update(region="eu-west-1")
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.RIGHT_SIZE).exists()
    GpuInstancePrice.objects.filter(instance_type="g6.12xlarge").update(region="us-east-1")
    findings_recompute()
    assert finding(Kind.RIGHT_SIZE, "i-rs").savings_per_month == {"USD": "10.7"}


def test_right_size_needs_memory_metrics(organization, delivery, project):
    right_size_box(delivery, project, [None, None, None, None], [10.0, 10.0, 10.0, 10.0])
    recompute(delivery)
    assert not Finding.objects.filter(kind=Kind.RIGHT_SIZE).exists()


# -- counted once -------------------------------------------------------------------------------


def test_a_line_hour_in_a_stretch_between_runs_and_idle_counts_once(
    organization, delivery, project, client
):
    """nb-x billed 00:00-12:00 at 1.00; its notebook registered 00:00-01:00 only. 00:00-09:00
    fully idle (a stretch of 10 hours), 10:00-11:00 busy. Notebook left running 10.00 (00-09);
    idle GPU 10.00 (the same hours); between runs: 01:00-11:00 are outside the notebook's use,
    but 01-09 are in the stretch already -> 10:00 and 11:00, 2.00. Counted once: 12.00, not
    22.00."""
    notebook_run(project, "nb-x", started=0, ended=1)
    hourly_lines(delivery, "nb-x", range(12), "1.00", project=project, workload="development")
    card = gpu("x", "nb-x")
    for number in range(12):
        measure(card, number, idle=60 if number < 10 else 0)
    recompute(delivery)
    assert finding(Kind.NOTEBOOK_LEFT_RUNNING, "nb-x").wasted == {"USD": "10"}
    assert finding(Kind.IDLE_GPU, "nb-x").wasted == {"USD": "10"}
    assert finding(Kind.IDLE_BETWEEN_RUNS, "nb-x").wasted == {"USD": "2"}
    totals = waste_totals(
        findings=Finding.objects.all(), start=None, end=None, today=hour_at(0).date()
    )
    assert totals.wasted == {"USD": Decimal("12")}
    client.force_login(StaffFactory())
    page = client.get(reverse("waste"), {"start": DAY, "end": "2025-03-11", "status": ""})
    assert "$12.00" in page.content.decode()
    for kind in (Kind.NOTEBOOK_LEFT_RUNNING, Kind.IDLE_BETWEEN_RUNS, Kind.DATA_STARVED):
        assert f'value="{kind}"' in page.content.decode()
    only = client.get(
        reverse("waste"), {"kind": Kind.IDLE_BETWEEN_RUNS, "status": "", "start": DAY}
    )
    assert "nb-x" in only.content.decode()


def test_part_two_kinds_are_in_the_findings_command(organization, delivery, project):
    import json
    from io import StringIO

    from django.core.management import call_command

    notebook_run(project, "nb-1")
    hourly_lines(delivery, "nb-1", range(9), "0.50", project=project, workload="development")
    card = gpu("n1", "nb-1")
    for number in range(9):
        measure(card, number, idle=60)
    recompute(delivery)
    out = StringIO()
    call_command("findings", "--json", "--kind", "notebook_left_running", stdout=out)
    rows = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [(row["resource_id"], row["wasted"]) for row in rows] == [("nb-1", {"USD": "4.5"})]
    assert rows[0]["first_seen"] == datetime(2025, 3, 10, 0, tzinfo=UTC).isoformat()
