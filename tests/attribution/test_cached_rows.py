"""cached_rows runs the SQL it is keyed by and gives back what Django's values() gives: the same
row dicts, the same types, in the same order, for every shape of query the pages cache."""

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Count, F, Max, Q, Sum, Value
from django.test.utils import CaptureQueriesContext

from apps.billing.models import DailyCost, MonthlyCost
from apps.experiments.models import Experiment
from apps.spend.figures import _request_finished, _request_started, cached_rows, version_bump

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_a_request():
    """Figures are cached within a request only (a task computes them afresh). What the request
    signals set, without closing the test's connection as Django's handlers of them would."""
    _request_started()
    yield
    _request_finished()


def queries() -> dict:
    usd = DailyCost.objects.filter(billing_currency="USD")
    march = usd.filter(day__gte=date(2025, 3, 1))
    return {
        "grouped, ordered by an amount": march.values("project_id")
        .annotate(amount=Sum("effective_cost"), days=Count("day", distinct=True))
        .order_by("-amount", "project_id"),
        "joined names, sliced": march.filter(experiment__isnull=False)
        .values("experiment_id", "experiment__name", "experiment__started_at")
        .annotate(amount=Sum("effective_cost"), last=Max("day"))
        .order_by("-amount", "experiment_id")[:2],
        "months and days in one statement": march.values("workload")
        .annotate(amount=Sum("effective_cost"))
        .order_by()
        .union(
            MonthlyCost.objects.filter(month__lt=date(2025, 3, 1), billing_currency="USD")
            .annotate(day=F("month"))
            .values("workload")
            .annotate(amount=Sum("effective_cost"))
            .order_by(),
            all=True,
        ),
        "a constant column": march.values("cost_kind")
        .annotate(part=Value("this"), amount=Sum("billed_cost"))
        .order_by("cost_kind"),
        "distinct, ordered by a column it leaves out": usd.values("workload")
        .distinct()
        .order_by("day"),
        "model rows by id": Experiment.objects.filter(pk__in=[0])
        .values("pk", "name")
        .union(Experiment.objects.values("pk", "name"), all=True)
        .order_by("name"),
    }


@pytest.mark.parametrize("name", list(queries()))
def test_the_rows_are_what_values_gives_and_a_second_read_runs_no_sql(bill, in_a_request, name):
    query = queries()[name]
    expected = list(query)
    assert expected, "a query that returns nothing proves nothing"
    rows = cached_rows(query)
    assert rows == expected
    assert [[type(value) for value in row.values()] for row in rows] == [
        [type(value) for value in row.values()] for row in expected
    ]
    # The same question again (a new queryset, the same SQL): from the cache, and the versions
    # were read once for the request.
    with CaptureQueriesContext(connection) as captured:
        assert cached_rows(queries()[name]) == expected
    assert len(captured) == 0
    # After a change of spend, computed afresh.
    version_bump()
    with CaptureQueriesContext(connection) as captured:
        assert cached_rows(queries()[name]) == expected
    assert len(captured) == 2  # the versions, then the query


def test_the_amounts_are_the_bills_to_the_cent(bill, in_a_request):
    rows = cached_rows(queries()["grouped, ordered by an amount"])
    by_project = {row["project_id"]: row["amount"] for row in rows}
    assert by_project[bill.vision_project.pk] == Decimal("185.00")


def test_a_filter_that_matches_nothing_is_no_rows_and_no_sql(bill, in_a_request):
    with CaptureQueriesContext(connection) as captured:
        assert cached_rows(DailyCost.objects.filter(Q(pk__in=[])).values("day")) == []
    assert len(captured) == 0


def test_an_outer_statement_groups_the_parts_of_a_union(bill, in_a_request):
    union = queries()["months and days in one statement"]
    summed: dict[str, Decimal] = {}
    for row in union:
        summed[row["workload"]] = summed.get(row["workload"], Decimal(0)) + row["amount"]
    outer = "SELECT workload, SUM(amount) FROM parts GROUP BY workload ORDER BY workload"
    rows = cached_rows(union, outer=outer)
    assert rows == [{"workload": key, "amount": summed[key]} for key in sorted(summed)]
    assert len(rows) < len(list(union))  # a workload in both parts is one row
