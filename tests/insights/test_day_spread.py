"""The storage kinds read a daily rollup: a day's money is spread over its 24 hours where the
hours are stored, in SQL on PostgreSQL (services._days_spread_sql) and in Python elsewhere
(services._day_rows); both give the same hours to the last place."""

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection

from apps.insights import services
from apps.insights.compute import DayPart, day_hours

from .conftest import at

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the SQL spread is PostgreSQL's"),
]

DAY = date(2025, 3, 10)


def test_a_day_spreads_in_even_truncated_parts_with_the_rest_on_its_last_hour():
    hours = day_hours(DAY, DayPart(Decimal("1.00"), Decimal("0.000000000000023"), (1, 2, None)))
    assert [hour for hour, _, _ in hours] == [at(f"2025-03-10 {h:02}:00") for h in range(24)]
    assert hours[0][1:] == (Decimal("0.041666666666666"), Decimal("0E-15"))
    assert hours[23][1:] == (Decimal("0.041666666666682"), Decimal("0.000000000000023"))
    assert sum(spend for _, spend, _ in hours) == Decimal("1.00")


def test_the_parts_of_one_day_are_each_spread_then_added_with_the_first_ones_owner():
    tiny = DayPart(Decimal("0.000000000000023"), Decimal("0.000000000000023"), (1, 2, None))
    refund = DayPart(Decimal("-5.123456789012345"), Decimal("0"), (3, None, 4))
    rows = services._day_rows(7, DAY, "USD", "bucket-a", [tiny, refund])
    assert len(rows) == 24
    # Hour 0: 0 + -0.213477366208847; hour 23: 0.000000000000023 + the refund's remainder.
    assert rows[0][4:] == (Decimal("0E-15"), Decimal("-0.213477366208847"), True, None, 1, 2, None)
    assert rows[23][5] == Decimal("0.000000000000023") + Decimal("-0.213477366208864")
    assert sum(row[5] for row in rows) == Decimal("-5.123456789012322")


def test_sql_and_python_spread_the_same_days_the_same_way():
    days = [
        # finding, line key, day, currency, the day's part
        (7, "bucket-a", DAY, "USD", DayPart(Decimal("1.00"), Decimal("0.25"), (1, 2, None))),
        (7, "bucket-a", date(2025, 3, 11), "USD",
         DayPart(Decimal("0.000000000000023"), Decimal("0.000000000000023"), (1, 2, None))),
        (9, "bucket-b", date(2025, 3, 11), "USD",
         DayPart(Decimal("-5.123456789012345"), Decimal("0"), (3, None, 4))),
        (8, "acct/S3", DAY, "EUR", DayPart(Decimal("-0.7"), Decimal("-0.7"), (None, None, None))),
        (10, "bucket-c", DAY, "USD",
         DayPart(Decimal("123456789.987654321012345"), Decimal("98765.000000000000001"),
                 (5, None, None))),
    ]  # fmt: skip
    expected = sorted(
        row
        for finding, key, day, currency, part in days
        for row in services._day_rows(finding, day, currency, key, [part])
    )
    day_rows = [
        (finding, key, services.compute.day_start(day), currency, part.spend, part.wasted,
         *part.owner)
        for finding, key, day, currency, part in days
    ]  # fmt: skip
    columns = ", ".join(services.HOUR_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE {services.COMPUTED_TABLE} AS SELECT {columns}"
            " FROM insights_findinghour WITH NO DATA"
        )
        services._days_spread_sql(cursor, day_rows)
        cursor.execute(f"SELECT {columns} FROM {services.COMPUTED_TABLE}")
        got = sorted(cursor.fetchall())
        cursor.execute(f"DROP TABLE {services.COMPUTED_TABLE}")
    assert len(got) == 120
    assert got == expected
