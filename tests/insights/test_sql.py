"""The SQL path (PostgreSQL) and the Python path (SQLite, the reference) give the same findings
and the same FindingHour rows to the last decimal place, on awkward figures: thirds, a line over
seven hours cut by the period, two owners tied in an hour, a second currency, a GPU resolved by
its instance id's tail, shares that round half to even."""

from contextlib import contextmanager
from datetime import date
from decimal import Decimal

import pytest
from django.db import connection

from apps.billing.models import CostKind
from apps.experiments.models import Experiment
from apps.gpu.models import Gpu, GpuHour
from apps.insights import compute, services
from apps.insights.models import Finding, FindingHour, Kind, RecomputeLine
from tests.factories import ExperimentFactory, ProjectFactory

from .conftest import gpu_hour, line

pytestmark = pytest.mark.django_db

FINDING_FIELDS = (
    "kind",
    "subject_key",
    "resource_id",
    "billing_account_id",
    "service_name",
    "wasted",
    "savings_per_month",
    "rank_amount",
    "reason",
    "evidence",
    "status",
    "first_seen",
    "last_seen",
    "project_id",
    "experiment_id",
    "deployment_id",
)
HOUR_FIELDS = (
    "finding__kind",
    "finding__subject_key",
    "line_key",
    "hour",
    "currency",
    "wasted",
    "spend",
    "measured",
    "idle_share",
    "project_id",
    "experiment_id",
    "deployment_id",
)


@pytest.fixture
def awkward(bill, delivery, project):
    # The GPUs name the instance by its ARN, the bill by its id.
    arn = "arn:aws:ec2:us-east-1:111:instance/i-arn"
    gpus = [
        Gpu.objects.create(uuid=f"GPU-t{n}", host="host-t", resource_label=arn) for n in (1, 2, 3)
    ]
    other = ExperimentFactory(project=project, name="other", external_id="other-1")
    # 10.00 over 7 hours (from 09:30: 09:00 to 15:00), 1.00 thirds, a tie of two owners at 17:00.
    line(
        delivery, "2025-03-11 09:30", "2025-03-11 16:00", "10.00", resource="i-arn", project=project
    )
    line(
        delivery, "2025-03-11 16:00", "2025-03-11 17:00", "1.00", resource="i-arn", project=project
    )
    line(
        delivery,
        "2025-03-11 17:00",
        "2025-03-11 18:00",
        "2.00",
        resource="i-arn",
        project=project,
        experiment=bill["run"],
    )
    line(
        delivery,
        "2025-03-11 17:00",
        "2025-03-11 18:00",
        "2.00",
        resource="i-arn",
        project=project,
        experiment=other,
    )
    line(
        delivery,
        "2025-03-11 17:00",
        "2025-03-11 18:00",
        "0.000000000000001",
        resource="i-arn",
        project=project,
    )
    line(
        delivery,
        "2025-03-11 10:00",
        "2025-03-11 11:00",
        "7.00",
        resource="i-arn",
        project=project,
        currency="EUR",
    )
    line(
        delivery,
        "2025-03-11 00:00",
        "2025-03-14 00:00",
        "50.00",
        service="Support",
        kind=CostKind.OTHER,
    )
    # A failed run's whole life (failed_run): 3.00 over 3 hours of its GPU box from 20:30, a
    # storage line of the box at 21:00 (written first, under a later project) tied with a third
    # of it, a bucket's 2.00 over two hours, and a support line with no resource in EUR; the
    # run's resource is the box (4.00 against the bucket's 2.00).
    crashed = ExperimentFactory(
        project=project, name="crashed", external_id="crashed-1", status=Experiment.Status.FAILED
    )
    line(
        delivery,
        "2025-03-11 21:00",
        "2025-03-11 22:00",
        "1.00",
        resource="i-box",
        project=ProjectFactory(team=project.team, slug="later"),
        experiment=crashed,
        kind=CostKind.STORAGE,
    )
    line(
        delivery,
        "2025-03-11 20:30",
        "2025-03-11 23:00",
        "3.00",
        resource="i-box",
        project=project,
        experiment=crashed,
    )
    line(
        delivery,
        "2025-03-11 23:00",
        "2025-03-12 01:00",
        "2.00",
        resource="bucket-c",
        project=project,
        experiment=crashed,
        kind=CostKind.STORAGE,
    )
    line(
        delivery,
        "2025-03-11 22:00",
        "2025-03-11 23:00",
        "0.50",
        service="Support",
        project=project,
        experiment=crashed,
        kind=CostKind.OTHER,
        currency="EUR",
    )
    for hour in range(9, 18):
        # 3 GPUs of 7 samples, 1, 2 and 2 idle: shares of 5/21, and 1/2 at 17:00 (half to even).
        for gpu, idle in zip(gpus, (1, 2, 2), strict=True):
            gpu_hour(
                gpu, f"2025-03-11 {hour:02}:00", 7 if hour != 17 else 2, idle if hour != 17 else 1
            )
    return "i-arn"


def _snapshot():
    findings = sorted(
        tuple(row[field] for field in FINDING_FIELDS)
        for row in Finding.objects.values(*FINDING_FIELDS)
    )
    hours = sorted(
        tuple(row[field] for field in HOUR_FIELDS)
        for row in FindingHour.objects.values(*HOUR_FIELDS)
    )
    return findings, hours


def _both_paths(monkeypatch, **period):
    """Recompute by SQL, snapshot, start again by Python, snapshot."""
    assert connection.vendor == "postgresql"
    services.findings_recompute(**period)
    by_sql = _snapshot()
    Finding.objects.all().delete()
    monkeypatch.setattr(services, "KIND_SQL", {})
    services.findings_recompute(**period)
    return by_sql, _snapshot()


def test_sql_and_python_paths_give_the_same_findings_and_hours(awkward, monkeypatch):
    by_sql, by_python = _both_paths(monkeypatch)
    assert by_sql == by_python
    findings, hours = by_sql
    assert len(hours) > 20
    arn = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key=awkward)
    assert arn.evidence["gpus"] == 3
    # 10.00 over 7 hours: six parts of 1.428571428571428 and the remainder on the last.
    spends = dict(
        FindingHour.objects.filter(finding=arn, currency="USD").values_list("hour__hour", "spend")
    )
    assert spends[9] == Decimal("1.428571428571428")
    assert spends[15] == Decimal("1.428571428571432")
    # 17:00: 4.000000000000001 × 3 idle of 6 samples is 2.0000000000000005: half to even.
    at_five = FindingHour.objects.get(finding=arn, currency="USD", hour__hour=17)
    assert (at_five.spend, at_five.wasted) == (
        Decimal("4.000000000000001"),
        Decimal("2.000000000000000"),
    )
    # The two 2.00 owners tie: the lower experiment id takes the hour.
    tied = Experiment.objects.filter(external_id__in=["resnet-1", "other-1"])
    assert at_five.experiment_id == min(tied.values_list("pk", flat=True))


def test_a_failed_runs_hours_in_sql_are_those_of_python(awkward, monkeypatch):
    by_sql, by_python = _both_paths(monkeypatch)
    assert by_sql == by_python
    crashed = Finding.objects.get(kind=Kind.FAILED_RUN)
    assert (crashed.subject_key, crashed.resource_id) == (
        f"run:{crashed.experiment_id}",
        "i-box",
    )
    assert crashed.wasted == {"EUR": "0.5", "USD": "6"}
    hours = {
        (row.line_key, row.hour.hour): (row.spend, row.project_id)
        for row in crashed.hours.filter(currency="USD")
    }
    # 20:00, 21:00 and 22:00 a third of 3.00 each; 21:00 adds the storage line's 1.00, which
    # ties with the GPU third: the lower project id owns the hour, whichever line came first.
    assert hours == {
        ("i-box", 20): (Decimal("1.000000000000000"), crashed.project_id),
        ("i-box", 21): (Decimal("2.000000000000000"), crashed.project_id),
        ("i-box", 22): (Decimal("1.000000000000000"), crashed.project_id),
        ("bucket-c", 23): (Decimal("1.000000000000000"), crashed.project_id),
        ("bucket-c", 0): (Decimal("1.000000000000000"), crashed.project_id),
    }
    assert list(crashed.hours.filter(currency="EUR").values_list("line_key", "spend")) == [
        ("111/Support", Decimal("0.500000000000000"))
    ]


def test_the_recompute_s_one_copy_of_the_lines_gives_what_the_line_table_gives(
    awkward, monkeypatch
):
    """compute.lines_shared: the kinds reading GPU-compute, unattributed and failed runs' lines
    read them from one copy made at the start; without it they read the line table."""
    for period in ({}, {"start": date(2025, 3, 11), "end": date(2025, 3, 12)}):
        Finding.objects.all().delete()
        services.findings_recompute(**period)
        shared = _snapshot()
        Finding.objects.all().delete()
        monkeypatch.setattr(compute, "lines_shared", _no_copy)
        services.findings_recompute(**period)
        monkeypatch.undo()
        assert _snapshot() == shared
        assert len(shared[1]) > 20


def test_a_periods_copy_holds_a_failed_runs_whole_life_only_while_it_has_no_finding(
    awkward, delivery, project, monkeypatch
):
    """A period's copy holds a failed run's lines in the period; the rest of its life only
    while the run has no finding (whose resource is read from its whole life). Either way the
    findings and hours are those read from the line table."""
    crashed = Experiment.objects.get(external_id="crashed-1")
    # Its bucket billed again a week later, outside the period.
    line(
        delivery,
        "2025-03-20 00:00",
        "2025-03-20 02:00",
        "4.00",
        resource="bucket-c",
        project=project,
        experiment=crashed,
        kind=CostKind.STORAGE,
    )
    period = {"start": date(2025, 3, 11), "end": date(2025, 3, 12)}
    copied = []
    copying = compute.lines_shared

    @contextmanager
    def counted(**window):
        with copying(**window):
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT count(*) FROM {RecomputeLine._meta.db_table} WHERE experiment_id = %s",
                    [crashed.pk],
                )
                copied.append(cursor.fetchone()[0])
            yield

    monkeypatch.setattr(compute, "lines_shared", counted)
    services.findings_recompute(**period)  # no finding yet: its whole life
    created = _snapshot()
    Finding.objects.all().delete()
    services.findings_recompute()  # every line, its life included
    services.findings_recompute(**period)  # its finding there: the period's four lines
    assert copied == [5, 5, 4]
    failed = Finding.objects.get(kind=Kind.FAILED_RUN)
    assert failed.wasted == {"EUR": "0.5", "USD": "10"}
    refreshed = _snapshot()

    Finding.objects.all().delete()
    monkeypatch.setattr(compute, "lines_shared", _no_copy)
    services.findings_recompute(**period)
    assert _snapshot() == created
    Finding.objects.all().delete()
    services.findings_recompute()
    services.findings_recompute(**period)
    assert _snapshot() == refreshed


@contextmanager
def _no_copy(**_window):
    yield


def test_a_finding_whose_gpus_went_busy_keeps_its_hours_in_sql_as_in_python(awkward, monkeypatch):
    """The SQL path computes only resources some GPU of which idled in the period, and those
    with a finding already: one that went busy keeps its hours (0 wasted), as in Python."""
    shares = dict(GpuHour.objects.values_list("pk", "idle_share"))

    def went_busy() -> tuple:
        services.findings_recompute()
        assert Finding.objects.get(kind=Kind.IDLE_GPU, subject_key=awkward).status == "open"
        GpuHour.objects.update(idle_share=0.0)
        services.findings_recompute()
        return _snapshot()

    by_sql = went_busy()
    Finding.objects.all().delete()
    for pk, share in shares.items():
        GpuHour.objects.filter(pk=pk).update(idle_share=share)
    monkeypatch.setattr(services, "KIND_SQL", {})
    assert went_busy() == by_sql
    busy = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key=awkward)
    assert busy.status == "gone"
    assert busy.hours.count() == 10  # 09:00-17:00 in USD and 10:00 in EUR, each 0 wasted
    assert not busy.hours.exclude(wasted=0).exists()


def test_sql_and_python_paths_agree_on_a_period_that_cuts_lines(awkward, monkeypatch):
    by_sql, by_python = _both_paths(monkeypatch, start=date(2025, 3, 11), end=date(2025, 3, 12))
    assert by_sql == by_python
    support = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key="111/Support")
    # 24 of the 72 hours of 50.00 (a third of it, to the last place: the remainder is on the 13th).
    assert support.wasted == {"USD": "16.666666666666656"}


def test_a_reason_writes_thousands_with_a_separator(bill, delivery):
    # 1,200 hours of 12.00 with no project.
    line(
        delivery,
        "2025-03-01 00:00",
        "2025-04-20 00:00",
        "12.00",
        service="Support",
        kind=CostKind.OTHER,
    )
    services.findings_recompute()
    finding = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key="111/Support")
    assert finding.reason == "USD 12.00 with no project over 1,200 billed hours"
