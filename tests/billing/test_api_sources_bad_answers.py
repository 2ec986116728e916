"""Polled hosted-API sources against a provider on loopback that answers badly: invalid JSON,
JSON of the wrong shape, NaN, an HTML error page, a cut connection, a timeout. Each marks the
source unhealthy with a message naming what was wrong, writes nothing (the days pulled before
stay byte for byte, no run starts), and "Poll now" answers its redirect, never a 500."""

import json
from datetime import date, timedelta

import pytest
from django.urls import reverse

from apps.billing import api_sources, services_sources
from apps.billing.models import BillingSource, ImportRun, SourcePoll
from apps.billing.sources import SourceUnavailable

from .api_server import FakeProvider
from .test_api_sources import FEB, FEB_3, api_source, cost, poll, spend_log
from .test_sources import current_spend

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

LATER = FEB_3 + timedelta(days=1)
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.COSTSITE_DATA_DIR = tmp_path / "data"


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-test")
    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-litellm-test")


@pytest.fixture
def provider(acme):
    """An OpenAI provider the source has polled once well: February's 2.50 loaded."""
    with FakeProvider("openai") as provider:
        provider.days = {date(2025, 2, 1): [cost(2.0)], date(2025, 2, 2): [cost(0.5)]}
        provider.source = api_source(BillingSource.Kind.OPENAI_API, provider.url)
        poll(provider.source, FEB_3)
        provider.days[date(2025, 2, 2)] = [cost(0.6)]  # a late figure the bad answers hide
        yield provider


def files(source: BillingSource) -> dict[str, bytes]:
    state = api_sources.state_dir(source)
    return {str(p.relative_to(state)): p.read_bytes() for p in state.rglob("*") if p.is_file()}


def assert_refused(provider: FakeProvider, message: str | None) -> str:
    """The poll raises SourceUnavailable with `message` (any when None), the source shows it,
    and nothing moved: the message."""
    source = provider.source
    before, runs = files(source), ImportRun.objects.count()
    with pytest.raises(SourceUnavailable) as raised:
        services_sources.billing_source_poll(source=source, now=LATER)
    message = message or str(raised.value)
    assert str(raised.value) == message
    source.refresh_from_db()
    assert (source.health, source.consecutive_failures) == ("unhealthy", 1)
    assert source.last_error == message
    assert SourcePoll.objects.order_by("-pk").first().error == message
    assert files(source) == before
    assert ImportRun.objects.count() == runs
    assert current_spend() == {("openai", FEB): {"USD": "2.50"}}
    return message


def costs_url(provider: FakeProvider) -> str:
    return f"{provider.url}/v1/organization/costs"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('{"data": [', "answered something that is not JSON."),
        ("<!doctype html><p>Sign in</p>", "answered something that is not JSON."),
        ("[1, 2, 3]", "answered JSON without a data list."),
        ('{"object": "page", "data": {"start_time": 1}}', "answered JSON without a data list."),
        # Python's reader takes NaN and Infinity; JSON has neither, and no amount is one.
        (
            '{"data": [{"start_time": 1738454400, "results": [{"amount": {"value": NaN}}]}]}',
            "answered something that is not JSON.",
        ),
        ("[" * 100_000, "answered something that is not JSON."),
    ],
    ids=["cut", "html-200", "list", "data-object", "nan", "deep"],
)
def test_an_answer_that_is_no_page_is_refused(provider, body, problem):
    provider.raw = (200, "application/json", body)
    assert_refused(provider, f"{costs_url(provider)} {problem}")


def test_an_html_error_page_is_named_by_its_title(provider):
    provider.raw = (502, "text/html", NGINX_502)
    assert_refused(
        provider,
        f"{costs_url(provider)} answered HTTP 502 Bad Gateway: an HTML page: 502 Bad Gateway",
    )


def test_a_json_error_keeps_its_text(provider):
    body = '{"error": {"message": "Invalid admin key",\n  "type": "invalid_request_error"}}'
    provider.raw = (401, "application/json", body)
    assert_refused(
        provider,
        f"{costs_url(provider)} answered HTTP 401 Unauthorized: "
        '{"error": {"message": "Invalid admin key", "type": "invalid_request_error"}}',
    )


def on_page_2(change):
    """Change the window's second page only: the first was good, and none of it may be kept."""
    return lambda body: change(body) if body.get("next_page") == "page-3" else body


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda body: {**body, "next_page": {"cursor": "page-3"}},
            'next_page is not a page cursor: {"cursor": "page-3"}',
        ),
        (
            lambda body: {**body, "data": [{**body["data"][0], "start_time": 10**20}]},
            'a data element has no readable day: {"object": "bucket", "start_time": 1' + "0" * 20,
        ),
        (
            lambda body: {**body, "data": [{**body["data"][0], "results": "0.6 USD"}]},
            "the results of the bucket of 2025-02-02 are not a list of objects.",
        ),
        (
            lambda body: {**body, "data": [{**body["data"][0], "results": [[0.6, "usd"]]}]},
            "the results of the bucket of 2025-02-02 are not a list of objects.",
        ),
        (lambda body: {**body, "data": ["2025-02-02"]}, "a data element is not an object."),
    ],
    ids=["cursor-object", "time-overflow", "results-text", "results-lists", "data-text"],
)
def test_a_page_of_the_wrong_shape_is_refused_and_nothing_is_kept(provider, change, problem):
    provider.days[date(2025, 1, 31)] = [cost(1.0)]  # on the good first page of the window
    provider.mangle = on_page_2(change)
    message = assert_refused(provider, None)
    assert message.startswith(f"/v1/organization/costs: {problem}"), message


def test_a_connection_cut_in_the_middle_of_the_body_is_refused(provider):
    provider.truncate = True
    assert_refused(
        provider, f"{costs_url(provider)} answered a broken HTTP response (IncompleteRead)."
    )


def test_a_port_that_answers_no_http_is_refused(provider):
    provider.not_http = True
    assert_refused(
        provider, f"{costs_url(provider)} answered a broken HTTP response (BadStatusLine)."
    )


def test_a_provider_slower_than_the_timeout_is_refused(provider, monkeypatch):
    monkeypatch.setattr(api_sources, "HTTP_TIMEOUT_SECONDS", 0.2)
    provider.delay = 1.0
    assert_refused(provider, f"{costs_url(provider)} cannot be reached: timed out")


def test_litellm_total_pages_beyond_a_number_is_refused(acme):
    with FakeProvider("litellm") as provider:
        provider.raw = (200, "application/json", '{"data": [], "total_pages": 1e400}')
        source = api_source(BillingSource.Kind.LITELLM_API, provider.url)
        with pytest.raises(SourceUnavailable, match="total_pages is not a number"):
            services_sources.billing_source_poll(source=source, now=FEB_3)
        source.refresh_from_db()
        assert source.health == "unhealthy"
        assert source.last_error == "/spend/logs/ui: total_pages is not a number."


def test_litellm_pages_past_max_pages_are_refused(acme, monkeypatch):
    """A proxy whose total_pages keeps ahead of the pages read (and never answers an empty
    page) is not paging: the poll stops at MAX_PAGES, as next_page paging does."""
    monkeypatch.setattr(api_sources, "MAX_PAGES", 5)
    row = spend_log("req-1", "2025-02-01T10:00:00Z", "0.001")
    with FakeProvider("litellm") as provider:
        provider.mangle = lambda body: {**body, "data": [row], "total_pages": 50}
        source = api_source(BillingSource.Kind.LITELLM_API, provider.url)
        with pytest.raises(SourceUnavailable, match=r"^/spend/logs/ui: more than 5 pages\.$"):
            services_sources.billing_source_poll(source=source, now=FEB_3)
        assert len(provider.calls) == 5
    assert not ImportRun.objects.exists()


def test_poll_now_on_a_bad_answer_redirects_and_shows_the_error(
    provider, staff_client, eager_celery, django_capture_on_commit_callbacks
):
    provider.mangle = on_page_2(lambda body: {**body, "next_page": ["page-3"]})
    with django_capture_on_commit_callbacks(execute=True):
        answer = staff_client.post(reverse("billing_source_poll", args=[provider.source.pk]))
    assert answer.status_code == 302
    provider.source.refresh_from_db()
    assert provider.source.health == "unhealthy"
    assert provider.source.last_error == (
        f"/v1/organization/costs: next_page is not a page cursor: {json.dumps(['page-3'])}"
    )
    page = staff_client.get(reverse("billing_source_detail", args=[provider.source.pk]))
    assert page.status_code == 200
    assert "next_page is not a page cursor" in page.content.decode()


@pytest.mark.parametrize(
    ("kind", "values", "error"),
    [
        ("openai_api", {}, "Give the API's URL, e.g. https://api.openai.com."),
        ("litellm_api", {}, "Give the API's URL, e.g. https://api.openai.com."),
        ("s3", {"bucket": "exports"}, "Give the server's URL, e.g. http://minio:9000."),
    ],
)
@pytest.mark.parametrize("url", ["http://[::1", "https://[api.openai.com]/"])
def test_a_url_urlsplit_refuses_is_a_form_error(acme, staff_client, kind, values, error, url):
    answer = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "provider",
            "kind": kind,
            "format": "auto",
            "endpoint_url": url,
            "interval_minutes": 60,
            **values,
        },
    )
    assert answer.status_code == 200
    assert answer.context["form"].errors == {"endpoint_url": [error]}
    assert not BillingSource.objects.exists()


@pytest.mark.parametrize("days", [367, 10_000_000])
def test_restating_more_than_a_year_is_a_form_error(acme, staff_client, days):
    """10,000,000 days before today is no date: the poll would raise OverflowError."""
    answer = staff_client.post(
        reverse("billing_source_create"),
        {
            "name": "openai",
            "kind": "openai_api",
            "format": "auto",
            "restate_days": days,
            "interval_minutes": 60,
        },
    )
    assert answer.status_code == 200
    assert answer.context["form"].errors == {
        "restate_days": ["Ensure this value is less than or equal to 366."]
    }
    assert not BillingSource.objects.exists()
