"""The findings recompute reads the line table through its indexes: the runs' lines by
experiment and, on PostgreSQL, a BRIN index of the charge periods, which the recompute summarises
before it starts, so that the pages imported since are in it (billing migration 0012); the
unused part of commitments by a partial index (0013). Its session holds its temporary tables
in memory."""

import pytest
from django.db import connection
from django.db.models import F

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


def _temp_buffers() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW temp_buffers")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_new_session_holds_the_recompute_temporary_tables_in_memory():
    connection.close()  # a session of its own, as the command's and a worker's first recompute
    services._temporary_buffers()
    assert _temp_buffers() == services.TEMPORARY_BUFFERS
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_session_that_used_a_temporary_table_keeps_its_buffers():
    """PostgreSQL refuses the setting once a temporary table was used: the recompute goes on with
    the session's value (and the session is not left in an aborted transaction)."""
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE used (a int)")
        cursor.execute("INSERT INTO used VALUES (1)")
    before = _temp_buffers()
    services._temporary_buffers()
    assert before != services.TEMPORARY_BUFFERS
    assert _temp_buffers() == before
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM used")  # the session goes on
        assert cursor.fetchone() == (1,)
    connection.close()


def test_inside_a_transaction_the_setting_is_left_alone():
    before = _temp_buffers()
    services._temporary_buffers()  # (pytest-django's transaction: no SET that could abort it)
    assert _temp_buffers() == before


def _findings_pages() -> tuple[int, int]:
    """(pages of the findings table all visible, pages), as ANALYZE counts them."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE insights_finding")
        cursor.execute(
            "SELECT relallvisible, relpages FROM pg_class WHERE relname = 'insights_finding'"
        )
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_the_recompute_vacuums_the_findings_it_rewrote_so_the_pages_read_their_index_alone(
    bill,
):
    """The pages read who sees which findings from finding_visible_idx (migration 0012), without
    the table only where its visibility map says every row of a page is visible to all; the
    recompute rewrites every finding, which clears it, and vacuums the table after its commit."""
    from apps.insights.models import Finding

    services.findings_recompute()
    visible, pages = _findings_pages()
    assert Finding.objects.count() == 5
    assert visible == pages > 0

    # Without the vacuum, a rewrite leaves the pages to be read from the table.
    Finding.objects.update(rank_amount=F("rank_amount"))
    visible, pages = _findings_pages()
    assert visible < pages
    services.findings_table_vacuum()
    visible, pages = _findings_pages()
    assert visible == pages > 0


def test_inside_a_transaction_the_findings_table_is_not_vacuumed(bill, caplog):
    """VACUUM cannot run in a transaction: inside one (a test's, a caller's) nothing is tried, so
    the transaction goes on."""
    from apps.insights.models import Finding

    services.findings_recompute()
    services.findings_table_vacuum()

    assert Finding.objects.count() == 5
    assert "not vacuumed" not in caplog.text
