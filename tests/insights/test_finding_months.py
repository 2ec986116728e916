"""The findings' month rollup (PostgreSQL): each month is its days summed, after a recompute of
everything, of one day, and a finding's delete; and a period's sums read from whole months and
ragged days are what its days alone add up to, whatever the period's ends."""

from collections import defaultdict
from datetime import date
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext

from apps.insights.days import days_forget, days_seen
from apps.insights.models import Finding, FindingDay, FindingMonth, Kind
from apps.insights.selectors import _period_parts, _top_in_period, period_sums
from apps.insights.services import findings_recompute

from .conftest import gpu_hour, line

pytestmark = pytest.mark.django_db
DAYS = ("2025-01-31", "2025-02-01", "2025-02-20", "2025-03-31", "2025-04-01", "2025-04-15")


@pytest.fixture
def months(bill, delivery):
    """Beside the conftest's 10 March: i-u idle half the time (20.00 an hour, 10.00 idle) and a
    stray box nobody claims (i-zz, 30.00 an hour) on days either side of month ends."""
    for day in DAYS:
        line(delivery, f"{day} 10:00", f"{day} 11:00", "20.00", resource="i-u")
        gpu_hour(bill["gpus"]["g5"], f"{day} 10:00", 60, 30)
        line(delivery, f"{day} 12:00", f"{day} 13:00", "30.00", resource="i-zz")
    # Two strays of one day each, at a ragged end of most periods: the ranking must see them.
    line(delivery, "2025-01-31 15:00", "2025-01-31 16:00", "500.00", resource="i-big")
    line(delivery, "2025-04-01 15:00", "2025-04-01 16:00", "400.00", resource="i-late")
    findings_recompute()


def months_from_days() -> dict:
    summed: dict = defaultdict(lambda: [Decimal("0"), Decimal("0")])
    for day in FindingDay.objects.all():
        key = (day.finding_id, day.day.replace(day=1), day.currency)
        summed[key][0] += day.wasted
        summed[key][1] += day.alone
    return {key: tuple(sums) for key, sums in summed.items()}


def months_stored() -> dict:
    return {
        (month.finding_id, month.month, month.currency): (month.wasted, month.alone)
        for month in FindingMonth.objects.all()
    }


def test_each_month_is_its_days_summed(months):
    stored = months_stored()
    assert stored == months_from_days()
    stray = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key__contains="i-zz")
    assert {month: sums[0] for (pk, month, _), sums in stored.items() if pk == stray.pk} == {
        date(2025, 1, 1): Decimal("30.00"),
        date(2025, 2, 1): Decimal("60.00"),
        date(2025, 3, 1): Decimal("30.00"),
        date(2025, 4, 1): Decimal("60.00"),
    }


def test_a_recompute_of_one_day_and_a_delete_keep_the_months(months, delivery):
    line(delivery, "2025-02-20 14:00", "2025-02-20 15:00", "45.00", resource="i-zz")
    findings_recompute(start=date(2025, 2, 20), end=date(2025, 2, 21))
    stray = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key__contains="i-zz")
    assert FindingMonth.objects.get(finding=stray, month=date(2025, 2, 1)).wasted == Decimal(
        "105.00"
    )
    assert months_stored() == months_from_days()
    gone = Finding.objects.filter(pk=stray.pk)
    seen = days_seen(gone)
    gone.delete()
    days_forget(seen)
    assert not FindingMonth.objects.filter(finding_id=stray.pk).exists()
    assert months_stored() == months_from_days()


PERIODS = [
    (None, None),
    (None, date(2025, 4, 10)),
    (date(2025, 2, 15), None),
    (date(2025, 1, 31), date(2025, 4, 2)),
    (date(2025, 2, 1), date(2025, 4, 1)),
    (date(2025, 2, 1), date(2025, 3, 1)),
    (date(2025, 3, 5), date(2025, 3, 20)),
    (date(2025, 3, 31), date(2025, 4, 1)),
    (date(2025, 3, 31), date(2025, 4, 2)),
]


@pytest.mark.parametrize(("start", "end"), PERIODS)
def test_a_periods_sums_from_months_and_days_are_its_days_summed(months, start, end):
    findings = Finding.objects.all()
    days = FindingDay.objects.all()
    if start is not None:
        days = days.filter(day__gte=start)
    if end is not None:
        days = days.filter(day__lt=end)
    by_finding = days.values("finding_id", "currency").annotate(amount=Sum("wasted"))
    expected = {(row["finding_id"], row["currency"]): row["amount"] for row in by_finding}
    got = period_sums(findings, start=start, end=end, by=("finding_id", "currency"))
    assert {(pk, currency): amount for pk, currency, amount in got} == expected
    alone = dict(days.values_list("currency").annotate(amount=Sum("alone")))
    assert (
        dict(period_sums(findings, start=start, end=end, by=("currency",), field="alone")) == alone
    )
    ranked = sorted(
        expected.items(),
        key=lambda item: (
            -item[1],
            -Finding.objects.get(pk=item[0][0]).rank_amount,
            -item[0][0],
        ),
    )
    top = [finding.pk for finding in _top_in_period(findings, start=start, end=end, limit=3)]
    assert top == [pk for (pk, _), _ in ranked[:3]]
    # Nothing to sum or rank, whatever the parts.
    nothing = Finding.objects.filter(pk__in=[])
    assert period_sums(nothing, start=start, end=end, by=("currency",)) == []
    assert _top_in_period(nothing, start=start, end=end, limit=3) == []


def test_whole_months_are_read_from_the_months(months):
    parts = _period_parts(Finding.objects.all(), start=date(2025, 1, 31), end=date(2025, 4, 2))
    assert [part.model for part in parts] == [FindingMonth, FindingDay, FindingDay]
    one_month = _period_parts(Finding.objects.all(), start=date(2025, 2, 1), end=date(2025, 3, 1))
    assert [part.model for part in one_month] == [FindingMonth]
    inside = _period_parts(Finding.objects.all(), start=date(2025, 3, 5), end=date(2025, 3, 20))
    assert [part.model for part in inside] == [FindingDay]
    # The stray box's 30.00 of 31 January and 60.00 of February, and nothing of 1 April's.
    stray = Finding.objects.filter(kind=Kind.UNATTRIBUTED, subject_key__contains="i-zz")
    assert period_sums(stray, start=date(2025, 1, 31), end=date(2025, 3, 1), by=("currency",)) == [
        ("USD", Decimal("90.00"))
    ]


def test_the_ranking_sees_the_ragged_ends(months):
    def top(start, end) -> list[str]:
        ranked = _top_in_period(Finding.objects.all(), start=start, end=end, limit=2)
        return [finding.subject_key for finding in ranked]

    big = Finding.objects.get(subject_key__contains="i-big").subject_key
    late = Finding.objects.get(subject_key__contains="i-late").subject_key
    assert top(date(2025, 1, 31), date(2025, 4, 2)) == [big, late]
    assert top(date(2025, 2, 1), date(2025, 4, 2)) == [late, top(date(2025, 2, 1), None)[1]]
    assert big not in top(date(2025, 2, 1), date(2025, 4, 1))
    assert late not in top(date(2025, 2, 1), date(2025, 4, 1))


def test_a_page_caches_the_sums_of_months_and_days(months, lead):
    """Through a request, the parts of one statement make one cache key: the same page again
    reads no finding row."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(lead)
    page = "/waste/?start=2025-01-31&end=2025-04-01"

    def findings_statements() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(page).status_code == 200
        return sum("insights_findingmonth" in query["sql"] for query in queries)

    assert findings_statements() > 0
    assert findings_statements() == 0


def _parallel_workers() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        return cursor.fetchone()[0]


def _sums_planned_alone(findings) -> tuple[list, list[str]]:
    """The top findings of 31 January – 15 April (a whole month and two ragged ends) and the
    statements that ranked them."""
    with CaptureQueriesContext(connection) as captured:
        top = _top_in_period(findings, start=date(2025, 1, 31), end=date(2025, 4, 15), limit=2)
    return top, [query["sql"] for query in captured]


@pytest.mark.parametrize("in_transaction", [True, False])
@pytest.mark.django_db(transaction=True)
def test_the_sums_are_planned_without_parallel_workers_and_the_setting_ends_with_them(
    months, in_transaction
):
    """A period's parts read a few thousand rows by index; the workers of a parallel plan took
    longer to start than they saved. The setting ends with the sums: after them, in autocommit
    or inside a caller's transaction, the connection plans as before."""
    before = _parallel_workers()
    assert before != "0"
    if in_transaction:
        with transaction.atomic():
            top, statements = _sums_planned_alone(Finding.objects.all())
            assert _parallel_workers() == before
    else:
        top, statements = _sums_planned_alone(Finding.objects.all())
    ranking = next(index for index, sql in enumerate(statements) if "sums.finding_id" in sql)
    assert statements[ranking - 1] == "SET LOCAL max_parallel_workers_per_gather = 0"
    assert len(top) == 2
    assert _parallel_workers() == before


def _resource_section(
    user, resource_id: str, start: date | None, end: date, *, kind: str = "", limit: int = 5
):
    """The findings section of a GPU's page: the findings on `resource_id`."""
    from apps.insights.selectors import _findings_section

    subjects = {"team": None, "project": None, "experiment": None, "deployment": None}
    return _findings_section(
        user=user, start=start, end=end, resource_id=resource_id, kind=kind, limit=limit, **subjects
    )


@pytest.mark.parametrize(("start", "end"), [period for period in PERIODS if period[1] is not None])
def test_a_narrow_subjects_section_is_the_one_the_general_path_gives(
    months, lead, staff, monkeypatch, start, end
):
    """A GPU's instance, a run or a deployment has its few findings read whole and its section
    worked out from one statement of sums (selectors._named_section): the same wasted, top
    findings with their period's wasted, and count as the statements for any set of findings
    give, for staff and a lead, before and after i-u's idle finding is resolved."""
    from apps.insights import selectors

    def section(user, resource_id, named_up_to, **options):
        monkeypatch.setattr(selectors, "NAMED_UP_TO", named_up_to)
        got = _resource_section(user, resource_id, start, end, **options)
        return got.wasted, [(finding.pk, wasted) for finding, wasted in got.top], got.active

    idle_u = Finding.objects.get(kind=Kind.IDLE_GPU, subject_key="i-u")
    unattributed_u = Finding.objects.get(kind=Kind.UNATTRIBUTED, subject_key__contains="i-u")
    for resolved in (False, True):
        if resolved:
            Finding.objects.filter(pk=idle_u.pk).update(status="resolved")
        for user in (staff, lead):
            for resource_id in ("i-u", "i-zz", "i-a", "i-b", "i-big", "i-nothing"):
                # The top cut to one (i-u's two findings ranked), and one kind of them.
                for options in ({}, {"limit": 1}, {"kind": Kind.IDLE_GPU}):
                    named = section(user, resource_id, 100, **options)
                    assert named == section(user, resource_id, -1, **options), (
                        user,
                        resource_id,
                        options,
                    )
    # i-u's idle finding, resolved, still counts in the wasted (as the general statements count
    # it), not among the active ones.
    wasted, top, active = section(staff, "i-u", 100)
    assert active == 1
    assert [pk for pk, _ in top] == [unattributed_u.pk]
    assert wasted == section(staff, "i-u", -1)[0]
    assert (wasted, top, active) != section(staff, "i-u", 100, kind=Kind.IDLE_GPU)


def test_a_subject_without_findings_reads_nothing_more(months, staff):
    with CaptureQueriesContext(connection) as captured:
        got = _resource_section(staff, "i-nothing", date(2025, 3, 1), date(2025, 4, 1))
    assert (got.wasted, got.top, got.active) == ({}, [], 0)
    assert got.query == "start=2025-03-01&end=2025-03-31"
    assert len(captured) == 1
