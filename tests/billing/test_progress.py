"""Progress goes through a second connection and commits at once: another connection sees rows
done and a total while the load itself is still uncommitted."""

import psycopg
import pytest
from django.db import connection

from apps.billing import importing
from apps.billing.models import ImportRun
from tests.celery_worker import _database_url

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "progress"])


def test_progress_is_visible_to_another_connection_before_the_load_commits(
    acme, tmp_path, settings, monkeypatch
):
    settings.BILLING_IMPORT_BATCH_ROWS = 5
    monkeypatch.setattr(importing, "PROGRESS_EVERY_SECONDS", 0)
    seen = []
    original = importing._Importer._progress

    def progress_then_look(self, source, *, force=False):
        original(self, source, force=force)
        with psycopg.connect(_database_url(connection.settings_dict)) as other:
            rows_done, rows_total, status = other.execute(
                "SELECT rows_done, rows_total, status FROM billing_importrun WHERE id = %s",
                [self.run_row.pk],
            ).fetchone()
            loaded = other.execute("SELECT count(*) FROM billing_costlineitem").fetchone()[0]
        seen.append((rows_done, rows_total is not None, status, loaded))

    monkeypatch.setattr(importing._Importer, "_progress", progress_then_look)
    path = write_focus(tmp_path / "many.csv", [focus_line(ResourceId=f"i-{n}") for n in range(60)])

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED
    assert len(seen) > 3
    rows_seen = [rows for rows, *_ in seen]
    assert rows_seen == sorted(rows_seen) and rows_seen[-1] == 60 and rows_seen[0] < 60
    assert all(
        has_total and status == "running" and loaded == 0 for _, has_total, status, loaded in seen
    )
    assert (run.rows_done, run.rows_total) == (60, 60)
