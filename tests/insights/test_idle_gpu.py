"""idle_gpu and unattributed on the hand-built bill of conftest.py."""

import json
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from apps.insights.models import Finding, FindingHour, Kind, RecomputeRun, Status
from apps.insights.services import findings_recompute

from .conftest import at

pytestmark = pytest.mark.django_db


def by_subject(kind: str) -> dict[str, Finding]:
    return {finding.subject_key: finding for finding in Finding.objects.filter(kind=kind)}


def test_idle_gpu_dollars_match_the_hand_computed_figures(bill, project):
    run = findings_recompute()
    assert run.status == RecomputeRun.Status.SUCCEEDED
    idle = by_subject(Kind.IDLE_GPU)
    assert sorted(idle) == ["i-a", "i-b", "i-u"]
    assert idle["i-a"].wasted == {"USD": "5"}
    assert idle["i-b"].wasted == {"USD": "3.25"}
    assert idle["i-u"].wasted == {"USD": "10"}
    assert idle["i-a"].rank_amount == Decimal("5")


def test_a_busy_gpu_is_no_finding(bill):
    findings_recompute()
    assert not Finding.objects.filter(subject_key="i-c").exists()


def test_an_unmeasured_hour_is_neither_idle_nor_busy(bill):
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
    unmeasured = FindingHour.objects.get(finding=finding, hour=at("2025-03-10 11:00"))
    assert (unmeasured.measured, unmeasured.wasted, unmeasured.spend) == (
        False,
        Decimal("0"),
        Decimal("4"),
    )
    assert finding.evidence["unmeasured_hours"] == 1
    assert finding.evidence["measured_hours"] == 2
    assert finding.reason == "GPU idle 62% of 3 billed hours (1 unmeasured)"


def test_a_line_spanning_hours_is_spread_evenly_over_the_gpus_that_reported(bill):
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-b")
    hours = {
        f"{row.hour:%H}": (row.spend, row.wasted, row.idle_share)
        for row in FindingHour.objects.filter(finding=finding)
    }
    assert hours == {
        "13": (Decimal("3"), Decimal("1.5"), Decimal("0.5")),
        "14": (Decimal("3"), Decimal("0.75"), Decimal("0.25")),
        "15": (Decimal("3"), Decimal("1"), Decimal("0.3333333333")),
    }
    assert finding.evidence["gpus"] == 2
    assert finding.reason == "GPU idle 36% of 3 billed hours"


def test_a_finding_is_attributed_to_its_lines_project_and_owner(bill, project):
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
    assert finding.project == project
    assert finding.experiment == bill["run"]
    assert (finding.first_seen, finding.last_seen) == (
        at("2025-03-10 10:00"),
        at("2025-03-10 12:00"),
    )


def test_unattributed_findings_per_resource_and_per_account_and_service(bill):
    findings_recompute()
    unattributed = by_subject(Kind.UNATTRIBUTED)
    assert sorted(unattributed) == ["111/Amazon S3", "i-u"]
    assert unattributed["i-u"].wasted == {"USD": "20"}
    assert unattributed["111/Amazon S3"].wasted == {"USD": "15"}
    assert unattributed["111/Amazon S3"].service_name == "Amazon S3"
    assert unattributed["111/Amazon S3"].reason == "USD 15.00 with no project over 24 billed hours"
    assert unattributed["i-u"].project is None


def test_findings_command_prints_one_json_object_per_finding(bill, project):
    findings_recompute()
    out = StringIO()
    call_command("findings", "--json", "--kind", "idle_gpu", "--project", project.slug, stdout=out)
    rows = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [(row["resource_id"], row["wasted"]) for row in rows] == [
        ("i-a", {"USD": "5"}),
        ("i-b", {"USD": "3.25"}),
    ]
    first = rows[0]
    assert first["kind"] == "idle_gpu"
    assert first["project"] == project.slug
    assert first["experiment"] == "resnet-1"
    assert first["deployment"] is None
    assert first["status"] == "open"
    assert first["savings_per_month"] == {"USD": "5"}
    assert first["first_seen"] == "2025-03-10T10:00:00+00:00"
    assert first["last_seen"] == "2025-03-10T12:00:00+00:00"


def test_findings_command_gives_the_waste_of_the_period_asked_for(bill):
    findings_recompute()
    out = StringIO()
    call_command(
        "findings",
        "--json",
        "--kind",
        "idle_gpu",
        "--start",
        "2025-03-11",
        "--end",
        "2025-03-12",
        stdout=out,
    )
    rows = [json.loads(text) for text in out.getvalue().splitlines()]
    assert {row["resource_id"]: row["wasted"] for row in rows} == {"i-a": {}, "i-b": {}, "i-u": {}}


def test_findings_recompute_command_prints_its_summary_as_json(bill):
    out = StringIO()
    call_command("findings_recompute", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["status"] == "succeeded"
    assert summary["kinds"]["idle_gpu"]["created"] == 3
    assert summary["kinds"]["unattributed"]["created"] == 2
    assert summary["findings"]["open"] == 5


def test_a_period_recompute_touches_only_its_days(bill, delivery, project):
    findings_recompute()
    # A later day's idle hour, recomputed alone, adds to i-a without redoing the 10th.
    from apps.gpu.models import Gpu

    from .conftest import gpu_hour, line

    line(delivery, "2025-03-12 09:00", "2025-03-12 10:00", "8.00", resource="i-a", project=project)
    gpu_hour(Gpu.objects.get(uuid="GPU-g1"), "2025-03-12 09:00", 60, 15)
    findings_recompute(start=date(2025, 3, 12), end=date(2025, 3, 13))
    finding = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-a")
    assert finding.wasted == {"USD": "7"}
    assert finding.last_seen == at("2025-03-12 09:00")
    assert finding.status == Status.OPEN


def test_a_gpu_idle_under_the_minimum_share_is_no_finding(bill):
    from apps.gpu.models import GpuHour
    from apps.insights.models import InsightsSettings

    GpuHour.objects.filter(gpu__uuid="GPU-g4").update(idle_share=6 / 60)  # 10% idle
    findings_recompute()
    assert not Finding.objects.filter(subject_key="i-c").exists()
    settings = InsightsSettings.get()
    settings.idle_gpu_min_share_percent = Decimal("10")
    settings.save()
    findings_recompute()
    assert Finding.objects.get(subject_key="i-c").wasted == {"USD": "0.5"}


def test_a_line_spread_over_hours_keeps_its_exact_total(bill, delivery, project):
    from .conftest import line

    line(delivery, "2025-03-10 00:00", "2025-03-10 03:00", "11.00", service="Support")
    findings_recompute()
    finding = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key="111/Support")
    assert finding.wasted == {"USD": "11"}
    assert sorted(FindingHour.objects.filter(finding=finding).values_list("spend", flat=True)) == [
        Decimal("3.666666666666666"),
        Decimal("3.666666666666666"),
        Decimal("3.666666666666668"),
    ]
