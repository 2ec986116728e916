"""The billing sources pages: staff only (404 for everybody else), the form with its errors in
place, a source's polls and deliveries, pause, "Poll now" and the re-run form."""

from datetime import date, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.billing import services_sources
from apps.billing.models import BillingSource, SourcePoll

from .test_sources import NOW, execute, folder_source, january

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture
def source(acme, tmp_path) -> BillingSource:
    january(tmp_path / "2025-01.csv", "1.50", "2.25")
    return folder_source(tmp_path, name="aws-exports")


def urls(source: BillingSource) -> list[tuple[str, str]]:
    return [
        ("get", reverse("billing_source_list")),
        ("get", reverse("billing_source_create")),
        ("get", reverse("billing_source_detail", args=[source.pk])),
        ("get", reverse("billing_source_edit", args=[source.pk])),
        ("post", reverse("billing_source_pause", args=[source.pk])),
        ("post", reverse("billing_source_poll", args=[source.pk])),
        ("post", reverse("billing_source_rerun", args=[source.pk])),
    ]


def test_only_staff_see_the_sources_pages(
    source, lead_client, member_client, outsider_client, staff_client
):
    for client in (lead_client, member_client, outsider_client):
        for method, url in urls(source):
            assert getattr(client, method)(url).status_code == 404, url
    for _method, url in urls(source)[:4]:
        assert staff_client.get(url).status_code == 200, url


def test_a_folder_that_does_not_exist_is_refused_in_place(acme, staff_client, tmp_path):
    missing = tmp_path / "nowhere"
    response = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "drop",
            "kind": "folder",
            "format": "auto",
            "path": str(missing),
            "interval_minutes": 60,
        },
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith("<form")
    assert f"{missing} does not exist on the server (or is not a folder)." in body
    assert not BillingSource.objects.exists()


def test_a_bucket_source_needs_a_bucket(acme, staff_client):
    response = staff_client.post(
        reverse("billing_source_create"),
        {"name": "s3", "kind": "s3", "format": "auto", "interval_minutes": 60},
    )

    assert "Give the bucket&#x27;s name." in response.content.decode()
    assert not BillingSource.objects.exists()


def test_a_new_source_is_saved_and_due_at_once(acme, staff_client, tmp_path):
    response = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "drop",
            "kind": "folder",
            "format": "auto",
            "path": str(tmp_path),
            "bucket": "ignored-for-a-folder",
            "interval_minutes": 30,
            "freshness_lag_days": 3,
        },
    )

    source = BillingSource.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("billing_source_detail", args=[source.pk])
    assert (source.kind, source.path, source.bucket, source.interval_minutes) == (
        "folder",
        str(tmp_path),
        "",
        30,
    )
    assert (source.lag_days, source.is_paused, source.next_poll_at is not None) == (3, False, True)


def test_the_detail_shows_polls_and_deliveries_with_their_totals(source, staff_client):
    execute(services_sources.billing_source_poll(source=source, now=NOW))
    services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=1))

    body = staff_client.get(reverse("billing_source_detail", args=[source.pk])).content.decode()

    assert body.count('<span class="badge badge-succeeded">Succeeded</span>') == 2
    assert "<code>111111111111</code>" in body
    assert "$3.75" in body
    assert '<span class="badge badge-succeeded">Current</span>' in body
    listing = staff_client.get(reverse("billing_source_list")).content.decode()
    assert "aws-exports" in listing
    assert "2 Jan 2025 11:00" in listing  # data as of
    assert "Succeeded · 1 found, 0 runs" in listing  # the last poll


def test_pause_poll_now_and_rerun_from_the_pages(
    source, staff_client, eager_celery, django_capture_on_commit_callbacks
):
    staff_client.post(reverse("billing_source_pause", args=[source.pk]))
    source.refresh_from_db()
    assert source.is_paused is True

    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(reverse("billing_source_poll", args=[source.pk]))
    poll = SourcePoll.objects.get()
    assert (poll.runs_started, poll.period_start) == (1, None)

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("billing_source_rerun", args=[source.pk]),
            {"period_start": "2025-01-01", "period_end": "2025-02-01"},
        )
    assert response.status_code == 302
    rerun = SourcePoll.objects.order_by("-pk").first()
    assert (rerun.period_start, rerun.period_end, rerun.runs_started) == (
        date(2025, 1, 1),
        date(2025, 2, 1),
        1,
    )


def test_a_rerun_period_that_ends_before_it_starts_is_refused_in_place(source, staff_client):
    response = staff_client.post(
        reverse("billing_source_rerun", args=[source.pk]),
        {"period_start": "2025-03-01", "period_end": "2025-01-01"},
        headers={"HX-Request": "true"},
    )

    body = response.content.decode()
    assert body.lstrip().startswith('<form method="post"')
    assert "The end comes after the start." in body
    assert not SourcePoll.objects.exists()


def test_the_admin_lists_sources_polls_and_seen_files(source, staff_client):
    execute(services_sources.billing_source_poll(source=source, now=NOW))

    for model in ("billingsource", "sourcepoll", "sourceobject"):
        response = staff_client.get(reverse(f"admin:billing_{model}_changelist"))
        assert response.status_code == 200, model
    page = staff_client.get(reverse("admin:billing_sourceobject_changelist")).content.decode()
    assert "2025-01.csv" in page


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_list_and_a_sources_page_cost_the_same_queries_for_one_source_or_many(
    source, staff_client, tmp_path
):
    execute(services_sources.billing_source_poll(source=source, now=NOW))
    detail = reverse("billing_source_detail", args=[source.pk])
    _queries(staff_client, detail)  # the first request of a session loads what later ones keep
    few = (_queries(staff_client, reverse("billing_source_list")), _queries(staff_client, detail))

    for n in range(4):
        folder = tmp_path / f"more-{n}"
        january(folder / "2025-01.csv", "1.00", account=f"55555555555{n}")
        other = folder_source(folder, name=f"more-{n}")
        execute(services_sources.billing_source_poll(source=other, now=NOW))
        execute(services_sources.billing_source_poll(source=source, now=NOW + timedelta(hours=n)))

    many = (_queries(staff_client, reverse("billing_source_list")), _queries(staff_client, detail))
    assert many == few


def test_the_list_shortens_a_long_error_that_the_sources_page_shows_whole(source, staff_client):
    error = "s3://bills/exports/ cannot be reached: " + "x" * 200
    BillingSource.objects.filter(pk=source.pk).update(health="unhealthy", last_error=error)

    listing = staff_client.get(reverse("billing_source_list")).content.decode()
    page = staff_client.get(reverse("billing_source_detail", args=[source.pk])).content.decode()

    assert f'<small class="wrap" title="{error}">{error[:99]}…</small>' in listing
    assert f'<p class="errorlist" role="alert" id="source-error">{error}</p>' in page


def test_a_sources_page_shows_its_accounts_data_as_of_without_a_source_column(source, staff_client):
    execute(services_sources.billing_source_poll(source=source, now=NOW))
    with time_machine.travel(NOW, tick=False):
        page = staff_client.get(reverse("billing_source_detail", args=[source.pk]))

    body = page.content.decode()
    table = body[body.index('<table class="striped" id="freshness">') :]
    table = table[: table.index("</table>")]
    assert '<th scope="col">Source</th>' not in table
    assert "<td><code>111111111111</code></td>" in table
    assert '<td class="nowrap">2 Jan 2025 11:00</td>' in table
    assert "31 days behind" in table  # 2 Jan 11:00 to 3 Feb 09:00


def test_a_hosted_api_source_is_saved_with_its_report_and_key_variable(acme, staff_client):
    response = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "openai",
            "kind": "openai_api",
            "format": "openai_usage",
            "path": "/ignored",
            "api_key_env": "OPENAI_ADMIN_KEY_PROD",
            "restate_days": 5,
            "interval_minutes": 1440,
        },
    )

    source = BillingSource.objects.get()
    assert response.status_code == 302
    assert (source.kind, source.format, source.path, source.endpoint_url) == (
        "openai_api",
        "openai_usage",
        "",
        "",
    )
    assert (source.api_key_env, source.restate_days, source.location) == (
        "OPENAI_ADMIN_KEY_PROD",
        5,
        "https://api.openai.com",
    )


def test_a_hosted_api_source_refuses_another_report_and_a_proxy_without_url(acme, staff_client):
    body = staff_client.post(
        reverse("billing_source_create"),
        {"name": "or", "kind": "openrouter_api", "format": "focus", "interval_minutes": 60},
    ).content.decode()
    assert "This source pulls one of: openrouter_activity." in body

    body = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "proxy",
            "kind": "litellm_api",
            "format": "auto",
            "api_key_env": "not a name",
            "interval_minutes": 60,
        },
    ).content.decode()
    assert "Give the proxy&#x27;s URL, e.g. http://litellm:4000." in body
    assert "An environment variable&#x27;s name: letters, digits, _." in body
    assert not BillingSource.objects.exists()
