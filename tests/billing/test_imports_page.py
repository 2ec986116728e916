"""The imports page and a run's page: filters by source and status, the live progress that polls
itself until the run is done (then 286), rows per second, deliveries and what they replaced, and
a failed run's full error. Staff only."""

import html
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.billing.models import BillingSource, ImportRun
from apps.billing.services import import_run_create, import_run_execute

from .conftest import focus_line, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

S = ImportRun.Status
ORIGIN = ImportRun.Origin
T0 = datetime(2025, 3, 4, 10, 0, 0, tzinfo=UTC)


def _run(
    name: str, *, origin=ORIGIN.COMMAND, status=S.SUCCEEDED, source=None, **values
) -> ImportRun:
    return ImportRun.objects.create(
        display_name=name,
        origin=origin,
        status=status,
        source=source,
        paths=[f"/x/{name}"],
        **values,
    )


@pytest.fixture
def runs(db):
    bucket = BillingSource.objects.create(name="Payer bucket", kind="s3", bucket="bills")
    folder = BillingSource.objects.create(name="Drop folder", kind="folder", path="/srv/bills")
    made = {
        "bucket-ok": _run("bucket-ok.csv", origin=ORIGIN.SOURCE, source=bucket),
        "bucket-bad": _run("bucket-bad.csv", origin=ORIGIN.SOURCE, source=bucket, status=S.FAILED),
        "folder-ok": _run("folder-ok.csv", origin=ORIGIN.SOURCE, source=folder),
        "upload-ok": _run("upload-ok.csv", origin=ORIGIN.UPLOAD),
        "upload-running": _run("upload-running.csv", origin=ORIGIN.UPLOAD, status=S.RUNNING),
        "cli-same": _run("cli-same.csv", status=S.UNCHANGED),
        "cli-queued": _run("cli-queued.csv", status=S.QUEUED),
    }
    made["bucket"], made["folder"] = bucket, folder
    return made


def _names(client, **query) -> list[str]:
    response = client.get(reverse("import_list"), query)
    assert response.status_code == 200
    return sorted(row.run.display_name for row in response.context["runs"])


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, None),
        ({"source": "bucket"}, ["bucket-bad.csv", "bucket-ok.csv"]),
        ({"source": "folder"}, ["folder-ok.csv"]),
        ({"source": "uploads"}, ["upload-ok.csv", "upload-running.csv"]),
        ({"source": "command"}, ["cli-queued.csv", "cli-same.csv"]),
        ({"status": "failed"}, ["bucket-bad.csv"]),
        ({"status": "running"}, ["upload-running.csv"]),
        ({"source": "bucket", "status": "succeeded"}, ["bucket-ok.csv"]),
        ({"source": "uploads", "status": "failed"}, []),
    ],
)
def test_the_filters_give_exactly_the_runs_asked_for(staff_client, runs, query, expected):
    query = {
        key: str(runs[value].pk) if key == "source" and value in runs else value
        for key, value in query.items()
    }
    names = _names(staff_client, **query)
    if expected is None:
        expected = sorted(run.display_name for run in ImportRun.objects.all())
        assert len(names) == 7
    assert names == expected


def test_an_unknown_filter_value_shows_every_run(staff_client, runs):
    assert len(_names(staff_client, source="nope", status="lost")) == 7


def test_the_source_filter_lists_each_source_then_uploads_and_the_command_line(staff_client, runs):
    page = staff_client.get(reverse("import_list")).content.decode()
    options = [
        f'<option value="{runs["folder"].pk}">Drop folder</option>',
        f'<option value="{runs["bucket"].pk}">Payer bucket</option>',
        '<option value="uploads">Uploads</option>',
        '<option value="command">Command line</option>',
    ]
    positions = [page.index(option) for option in options]
    assert positions == sorted(positions)


def test_a_filter_change_swaps_only_the_rows_and_keeps_the_filters_in_the_page_links(
    staff_client, runs, settings
):
    for n in range(30):
        _run(f"more-{n:02d}.csv", origin=ORIGIN.UPLOAD)
    response = staff_client.get(
        reverse("import_list"), {"source": "uploads"}, headers={"HX-Request": "true"}
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="run-rows">')
    assert "<html" not in body
    assert body.count('<tr id="run-') == 25
    assert response["HX-Push-Url"] == reverse("import_list") + "?source=uploads"
    assert 'href="?page=2&amp;source=uploads"' in body
    second = staff_client.get(reverse("import_list"), {"source": "uploads", "page": "2"})
    assert len(second.context["runs"]) == 32 - 25


def test_an_empty_filter_result_says_so(staff_client, runs):
    body = staff_client.get(
        reverse("import_list"), {"source": "uploads", "status": "failed"}
    ).content.decode()
    assert "No import matches these filters" in body


def test_a_running_runs_progress_keeps_polling(staff_client):
    run = _run(
        "big.csv",
        origin=ORIGIN.UPLOAD,
        status=S.RUNNING,
        started_at=T0,
        rows_done=30_000,
        rows_total=120_000,
    )
    with time_machine.travel(T0 + timedelta(seconds=12), tick=False):
        response = staff_client.get(reverse("import_run_progress", args=[run.pk]))
        row = staff_client.get(reverse("import_run_row", args=[run.pk]))
        listed = staff_client.get(reverse("import_list")).content.decode()

    body = response.content.decode()
    assert response.status_code == 200
    assert f'hx-get="{reverse("import_run_progress", args=[run.pk])}"' in body
    assert 'hx-trigger="every 1s"' in body
    assert '<progress id="run-progress" value="25" max="100"' in body
    assert '<span id="run-rows-done">30,000 of about 120,000 rows</span> (25%)' in body
    assert '<span id="run-speed">2,500 rows/s</span>' in body
    assert '<span id="run-duration">12.0 s</span>' in body
    assert row.status_code == 200
    assert 'hx-trigger="every 1s"' in row.content.decode()
    row_url = reverse("import_run_row", args=[run.pk])
    assert f'hx-get="{row_url}" hx-trigger="every 1s" hx-swap="outerHTML"' in listed


def test_a_queued_run_polls_too(staff_client):
    run = _run("waiting.csv", status=S.QUEUED)
    response = staff_client.get(reverse("import_run_progress", args=[run.pk]))
    assert response.status_code == 200
    assert 'hx-trigger="every 1s"' in response.content.decode()
    assert "Waiting for a worker to take it." in response.content.decode()


def test_a_done_runs_progress_answers_286_with_the_final_content(staff_client):
    run = _run(
        "done.csv",
        origin=ORIGIN.UPLOAD,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=8),
        rows_done=20_000,
        rows_total=20_000,
        line_items=20_000,
        effective_cost={"USD": "1234.5"},
        billed_cost={"USD": "1300"},
    )

    response = staff_client.get(reverse("import_run_progress", args=[run.pk]))
    row = staff_client.get(reverse("import_run_row", args=[run.pk]))

    body = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in body
    assert '<progress id="run-progress" value="100" max="100"' in body
    assert '<span id="run-speed">2,500 rows/s</span>' in body
    assert '<span id="run-duration">8.0 s</span>' in body
    assert '<td class="num total-effective">$1,234.50</td>' in body
    assert '<td class="num total-billed">$1,300.00</td>' in body
    assert row.status_code == 286
    assert "hx-trigger" not in row.content.decode()
    assert '<span class="run-speed">2,500 rows/s</span>' in row.content.decode()


def test_the_list_shows_rows_per_second_and_duration_of_each_run(staff_client):
    _run(
        "slow.csv",
        started_at=T0,
        finished_at=T0 + timedelta(minutes=2, seconds=5),
        rows_done=12_500,
        rows_total=12_500,
    )
    body = staff_client.get(reverse("import_list")).content.decode()
    assert (
        '<span class="run-speed">100 rows/s</span> · <span class="run-duration">2 min 05 s</span>'
        in body
    )


def test_a_failed_run_shows_its_full_error_with_file_row_and_column(
    staff_client, tmp_path, settings
):
    lines = [focus_line(), focus_line(), focus_line(BilledCost="12,50")]
    path = write_focus(tmp_path / "bad.csv", lines)
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.error == "bad.csv: row 4, column BilledCost: '12,50' is not a decimal number"

    response = staff_client.get(reverse("import_run_detail", args=[run.pk]))

    body = response.content.decode()
    assert f'<pre id="run-error" class="import-error">{html.escape(run.error)}</pre>' in body
    assert '<span class="badge badge-failed" id="run-status">Failed</span>' in body
    assert "Nothing of this import was loaded." in body
    # The result of the file at fault carries the same error in the deliveries table.
    assert f'<small class="delivery-error">{html.escape(run.error)}</small>' in body


def test_a_run_page_lists_its_deliveries_and_what_they_replaced(staff_client, tmp_path):
    first = write_focus(tmp_path / "jan-v1.csv", [focus_line(EffectiveCost="10.00")])
    second = write_focus(
        tmp_path / "jan-v2.csv",
        [focus_line(EffectiveCost="12.00", BilledCost="12.50"), focus_line(EffectiveCost="0.5")],
    )
    old = import_run_execute(import_run=import_run_create(paths=[str(first)]))
    new = import_run_execute(import_run=import_run_create(paths=[str(second)]))
    assert (old.status, new.status) == (S.SUCCEEDED, S.SUCCEEDED)

    body = staff_client.get(reverse("import_run_detail", args=[new.pk])).content.decode()
    old_body = staff_client.get(reverse("import_run_detail", args=[old.pk])).content.decode()

    assert "<td>111111111111</td>" in body
    assert "1 Jan 2025 – 1 Feb 2025" in body
    assert '<td class="num">$12.50</td>' in body  # spend: 12.00 + 0.5
    assert '<td class="num">$13.50</td>' in body  # billed: 12.50 + 1.00
    replaced = reverse("import_run_detail", args=[old.pk])
    assert f'from <a href="{replaced}">import #{old.pk}</a>' in body
    assert "$10.00" in body
    assert "replaced since" in old_body


@pytest.mark.parametrize("who", ["member_client", "lead_client", "outsider_client"])
def test_anybody_but_staff_gets_404_on_the_imports_pages(request, who):
    client = request.getfixturevalue(who)
    run = _run("secret.csv")
    for url in (
        reverse("import_list"),
        reverse("import_run_detail", args=[run.pk]),
        reverse("import_run_progress", args=[run.pk]),
        reverse("import_run_row", args=[run.pk]),
    ):
        assert client.get(url).status_code == 404, url


def test_a_missing_run_is_404_for_staff(staff_client):
    assert staff_client.get(reverse("import_run_detail", args=[999_999])).status_code == 404


def test_an_upload_runs_page_names_the_stored_file_the_errors_use(staff_client, tmp_path):
    run = _run("january.csv", origin=ORIGIN.UPLOAD)
    run.paths = [str(tmp_path / "0123abcd.csv")]
    run.save()
    body = staff_client.get(reverse("import_run_detail", args=[run.pk])).content.decode()
    assert f"stored as <code>{Path(run.paths[0]).name}</code>" in body


def test_a_running_run_of_unknown_size_has_a_moving_bar_and_a_failed_one_none(staff_client):
    running = _run("streaming.csv", status=S.RUNNING, started_at=T0, rows_done=500)
    failed = _run("broken.csv", status=S.FAILED, started_at=T0, finished_at=T0, rows_done=0)

    running_body = staff_client.get(reverse("import_run_detail", args=[running.pk])).content
    failed_body = staff_client.get(reverse("import_run_detail", args=[failed.pk])).content
    listed = staff_client.get(reverse("import_list")).content.decode()

    assert b'<progress id="run-progress" aria-label="Rows read"></progress>' in running_body
    assert b"<progress" not in failed_body
    assert '<progress aria-label="Rows read"></progress>' in _row(listed, running)
    assert "<progress" not in _row(listed, failed)


def _row(page: str, run: ImportRun) -> str:
    start = page.index(f'<tr id="run-{run.pk}"')
    return page[start : page.index("</tr>", start)]


def test_the_imports_list_costs_the_same_queries_for_seven_runs_or_thirty(staff_client, runs):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = staff_client.get(reverse("import_list"))
        assert response.status_code == 200
        return len(captured)

    queries()  # the first request of a session loads what later ones keep
    few = queries()
    bucket = runs["bucket"]
    for n in range(23):
        _run(f"more-{n:02d}.csv", origin=ORIGIN.SOURCE, source=bucket, status=S.RUNNING)
    assert queries() == few


def test_back_to_a_pushed_address_gets_the_whole_page(staff_client, runs):
    response = staff_client.get(
        reverse("import_list"),
        {"source": "uploads"},
        headers={"HX-Request": "true", "HX-History-Restore-Request": "true"},
    )

    body = response.content.decode()
    assert "<html" in body
    assert body.count('<tr id="run-') == 2
    assert "HX-Push-Url" not in response
    assert "HX-Request" in response["Vary"].split(", ")
