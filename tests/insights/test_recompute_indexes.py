"""The findings recompute reads the line table through its indexes: the runs' lines by
experiment and, on PostgreSQL, a BRIN index of the charge periods, which the recompute summarises
before it starts, so that the pages imported since are in it (billing migration 0012); the
unused part of commitments by a partial index (0013)."""

import pytest
from django.db import connection

from apps.billing.models import CostLineItem
from apps.billing.services import LINE_PERIOD_BRIN
from apps.insights import compute_part3, services

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
        cursor.execute(
            "SELECT current_setting('jit'), current_setting('random_page_cost'),"
            " current_setting('work_mem')"
        )
        assert cursor.fetchone() == ("off", "1.1", "256MB")


def test_the_unused_commitments_are_read_through_their_partial_index(bill):
    """billing migration 0013: the condition unused_commitment reads by implies the index's, so
    the planner may take it (without it every recompute scanned the line table's JSON)."""
    lines = CostLineItem.objects.filter(compute_part3._unused_condition()).values("resource_id")
    sql, params = lines.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "lineitem_unused_commit_idx" in plan
