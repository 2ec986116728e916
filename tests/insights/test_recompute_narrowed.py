"""A recompute of a period (an import's, a re-attribution's) narrowed to what that period's data
reaches, when every other input is as the last recompute had it (services._inputs): the lever
kinds, which read the 30 days ending at the bill's data as of whatever the period, are left alone
when the period lies outside those days; and only the findings whose hours it wrote, or whose
subject it found, are refreshed. What it leaves is what a whole recompute gives. On part 3's
hand-computed bill (test_part3.py: March 2025, data as of 2025-03-11 00:00, so the levers' days
are 9 February to 11 March)."""

from datetime import date
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.insights import services
from apps.insights.models import (
    LEVER_KINDS,
    Finding,
    GpuInstancePrice,
    InsightsSettings,
    Kind,
    RecomputeRun,
)
from tests.factories import DeploymentFactory

from . import test_part3
from .test_recompute_changes import crashed, crashed_cpu_costs

pytestmark = pytest.mark.django_db

delivery = test_part3.delivery
part3 = test_part3.part3


def rows() -> dict[int, tuple]:
    return {
        finding.pk: (
            finding.updated_at,
            finding.status,
            finding.wasted,
            finding.savings_per_month,
            finding.reason,
            finding.evidence,
        )
        for finding in Finding.objects.all()
    }


def skipped(summary: dict) -> set[str]:
    return {kind for kind, counts in summary["kinds"].items() if "skipped" in counts}


def test_a_period_outside_the_levers_days_leaves_them_and_changes_nothing(part3):
    before = rows()
    assert {Kind.SPOT_CANDIDATE, Kind.CHEAPER_REGION} <= {f.kind for f in Finding.objects.all()}

    run = services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))

    assert run.status == RecomputeRun.Status.SUCCEEDED
    assert run.summary["narrowed"] is True
    assert skipped(run.summary) == set(LEVER_KINDS)
    assert run.summary["kinds"][Kind.SPOT_CANDIDATE] == {
        **services.LEVER_SKIPPED,
        "seconds": run.summary["kinds"][Kind.SPOT_CANDIDATE]["seconds"],
    }
    assert rows() == before


def test_a_narrowed_recompute_leaves_what_a_whole_one_would(part3):
    crashed_cpu_costs("2.50")  # 5 March, 10:00: 1.50 -> 2.50

    run = services.findings_recompute(start=date(2025, 3, 5), end=date(2025, 3, 6))

    assert run.summary["narrowed"] is True
    assert skipped(run.summary) == set()  # 5 March is within the levers' days
    assert crashed(part3).wasted == {"USD": "11.5"}
    narrowed = rows()
    whole = services.findings_recompute()
    assert whole.summary["narrowed"] is False
    assert rows() == narrowed  # the whole recompute finds nothing more to write


def test_a_narrowed_recompute_refreshes_only_the_findings_it_reached(part3, monkeypatch):
    refreshed: dict[str, list[str]] = {}
    real = services._refresh

    def recording(*, kind, findings, **rest):
        refreshed[kind] = sorted(f.subject_key for f in findings)
        return real(kind=kind, findings=findings, **rest)

    monkeypatch.setattr(services, "_refresh", recording)
    crashed_cpu_costs("2.50")
    services.findings_recompute(start=date(2025, 3, 5), end=date(2025, 3, 6))

    # "crashed" (its hours on 5 March changed) among the failed runs; not the unused commitment
    # (its hours are on 10 March: nothing of it in the period).
    assert f"run:{part3['crashed'].pk}" in refreshed[Kind.FAILED_RUN]
    assert Finding.objects.filter(kind=Kind.UNUSED_COMMITMENT, subject_key="sp-1").exists()
    assert refreshed[Kind.UNUSED_COMMITMENT] == []
    # A lever kind is refreshed whole (one not found again saves nothing).
    assert refreshed[Kind.SPOT_CANDIDATE] == sorted(
        Finding.objects.filter(kind=Kind.SPOT_CANDIDATE).values_list("subject_key", flat=True)
    )


def test_changed_thresholds_or_prices_make_the_next_recompute_whole(part3):
    services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))
    spot = Finding.objects.get(kind=Kind.SPOT_CANDIDATE, resource_id="i-r")  # "tune"
    assert spot.savings_per_month == {"USD": "197"}

    # Prices of the catalogue: the spot prices the lever compares against, halved.
    for price in GpuInstancePrice.objects.filter(spot_per_hour__isnull=False):
        price.spot_per_hour /= 2
        price.save()
    run = services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))
    assert run.summary["narrowed"] is False
    assert skipped(run.summary) == set()
    spot.refresh_from_db()
    assert spot.savings_per_month != {"USD": "197"}

    # The next, with nothing else changed, is narrowed again.
    run = services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))
    assert run.summary["narrowed"] is True

    # A threshold.
    settings = InsightsSettings.get()
    settings.notebook_idle_hours += 1
    settings.save()
    run = services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))
    assert run.summary["narrowed"] is False


def test_the_command_says_which_kinds_it_left_alone(part3):
    out = StringIO()
    call_command("findings_recompute", "--start", "2024-01-01", "--end", "2024-02-01", stdout=out)
    lines = out.getvalue().splitlines()
    assert (
        "spot_candidate: not recomputed (its 30 days ending at the bill's data as of lie outside "
        "the period)"
    ) in lines
    assert sum("not recomputed" in line for line in lines) == len(LEVER_KINDS)
    assert "failed_run: 0 subjects, 0 new, 0 gone, 0 reopened" in lines  # none in 2024


def test_the_summary_says_where_the_time_went_besides_the_kinds(part3):
    summary = services.findings_recompute(start=date(2025, 3, 5), end=date(2025, 3, 6)).summary
    seconds = summary["seconds"]
    assert set(seconds) == {"index_summary", "shared_lines", "whole", "findings_vacuum"}
    kinds = [counts["seconds"] for counts in summary["kinds"].values()]
    parts = seconds["index_summary"] + seconds["shared_lines"] + sum(kinds)
    rounding = 0.0005 * (len(kinds) + 3)  # each figure rounded to the millisecond
    assert seconds["whole"] + rounding >= parts


def test_a_deployment_or_its_traffic_changed_makes_the_next_recompute_whole(part3):
    """The inference levers read deployments, their resources and traffic, and the build-or-call
    inputs, none of which announces changed days: a change there widens the next recompute."""
    from apps.deployments.models import TrafficHour

    def narrowed() -> bool:
        run = services.findings_recompute(start=date(2024, 1, 1), end=date(2024, 2, 1))
        return run.summary["narrowed"]

    assert narrowed() is True
    deployment = DeploymentFactory(project=part3["crashed"].project)
    assert narrowed() is False
    assert narrowed() is True
    deployment.replicas = 3
    deployment.save()
    assert narrowed() is False
    hour = TrafficHour.objects.create(
        deployment=deployment,
        hour=test_part3.at("2025-03-10 00:00"),
        requests=10,
        updated_at=timezone.now(),
    )
    assert narrowed() is False
    assert narrowed() is True
    hour.requests, hour.updated_at = 20, timezone.now()  # as the traffic's upsert writes it
    hour.save()
    assert narrowed() is False
