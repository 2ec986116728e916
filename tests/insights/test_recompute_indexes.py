"""The findings recompute reads the line table through two indexes (billing migration 0012): the
runs' lines by experiment, and on PostgreSQL a BRIN index of the charge periods, which the
recompute summarises before it starts, so that the pages imported since are in it."""

import pytest
from django.db import connection

from apps.billing.services import LINE_PERIOD_BRIN
from apps.insights import services

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="BRIN is PostgreSQL's"),
]


def _ranges_summarised_now() -> int:
    """Summarise what is left, and say how many page ranges that was."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT brin_summarize_new_values(%s::regclass)", [LINE_PERIOD_BRIN])
        return cursor.fetchone()[0]


def _forget_the_first_range() -> None:
    """As if the bill's first pages had been written after the index last summarised them (a
    small table's lines fit in the first range, which inserts keep summarised; a big import
    fills ranges past the last one summarised)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT brin_desummarize_range(%s::regclass, 0)", [LINE_PERIOD_BRIN])


def test_a_range_not_summarised_stays_so_until_asked(bill):
    _forget_the_first_range()
    assert _ranges_summarised_now() == 1
    assert _ranges_summarised_now() == 0


def test_the_recompute_summarises_the_lines_loaded_before_it(bill):
    _forget_the_first_range()
    services.findings_recompute()
    assert _ranges_summarised_now() == 0


def test_the_recompute_runs_without_jit_and_with_memory_page_costs():
    with connection.cursor() as cursor:
        services._planner_settings()
        cursor.execute("SELECT current_setting('jit'), current_setting('random_page_cost')")
        assert cursor.fetchone() == ("off", "1.1")
