"""Polled hosted-API sources against a provider on loopback serving the documented pages: every
page followed, a month per delivery, the last days restated exactly (and the same answer again
changes nothing), a provider that is down marks the source unhealthy and loses nothing.

Runs are executed here with `import_run_execute`, as a worker would."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Sum

from apps.billing import api_sources, services_sources
from apps.billing.models import BillingSource, CostLineItem, Delivery, ImportRun
from apps.billing.sources import SourceUnavailable
from tests.conftest_s3 import s3, s3_server  # noqa: F401 - fixtures

from .api_server import FakeProvider
from .test_sources import counts, current_spend, execute

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

FEB_3 = datetime(2025, 2, 3, 9, 0, tzinfo=UTC)
JAN, FEB = date(2025, 1, 1), date(2025, 2, 1)


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path) -> Path:
    settings.COSTSITE_DATA_DIR = tmp_path / "data"
    return settings.COSTSITE_DATA_DIR


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-test")
    monkeypatch.setenv("ANTHROPIC_ADMIN_KEY", "sk-ant-admin-test")
    monkeypatch.setenv("OPENROUTER_MANAGEMENT_KEY", "sk-or-test")
    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-litellm-test")


def api_source(kind: str, url: str, format: str = "auto", **values) -> BillingSource:  # noqa: A002
    return services_sources.billing_source_create(
        name=f"{kind} source", kind=kind, endpoint_url=url, format=format, **values
    )


def cost(value: float, line_item: str = "gpt-4o-2024-08-06, input", project="proj_a") -> dict:
    return {
        "object": "organization.costs.result",
        "amount": {"value": value, "currency": "usd"},
        "line_item": line_item,
        "project_id": project,
    }


def line_total() -> Decimal:
    return CostLineItem.objects.aggregate(total=Sum("billed_cost"))["total"]


def poll(source: BillingSource, now: datetime):
    source.refresh_from_db()
    done = services_sources.billing_source_poll(source=source, now=now)
    runs = execute(done)
    assert all(run.status == ImportRun.Status.SUCCEEDED for run in runs), [r.error for r in runs]
    return done, runs


def test_openai_costs_pages_are_followed_and_each_month_is_a_delivery(acme, data_dir):
    with FakeProvider("openai") as provider:
        provider.days = {
            date(2024, 12, 31): [cost(9.0)],  # before the window: never asked for
            date(2025, 1, 5): [cost(1.5)],
            date(2025, 1, 31): [cost(0.25), cost(0.1, "gpt-4o-2024-08-06, cached input")],
            date(2025, 2, 1): [cost(2.0, "gpt-4.1, output", "proj_b")],
            date(2025, 2, 3): [cost(0.75)],
        }
        source = api_source(BillingSource.Kind.OPENAI_API, provider.url)
        first, runs = poll(source, FEB_3)

    # First poll: the month the window starts in is pulled from its first day, to today.
    assert counts(first) == ("succeeded", 2, 2, 0, 0, 2)
    assert current_spend() == {("openai", JAN): {"USD": "1.85"}, ("openai", FEB): {"USD": "2.75"}}
    assert line_total() == Decimal("4.60")
    assert [run.display_name for run in runs] == [
        "openai_costs-2025-01.json",
        "openai_costs-2025-02.json",
    ]
    path, params, headers = provider.calls[0]
    assert path == "/v1/organization/costs"
    assert headers["authorization"] == "Bearer sk-admin-test"
    assert ("start_time", "1735689600") in params  # 2025-01-01
    assert ("end_time", "1738627200") in params  # 2025-02-04
    assert ("bucket_width", "1d") in params
    assert [value for name, value in params if name == "group_by"] == ["project_id", "line_item"]
    # 34 days in pages of 2 buckets: 17 pages, each asked for by the previous one's next_page.
    assert len(provider.calls) == 17
    assert [dict(p).get("page") for _, p, _ in provider.calls[:3]] == [None, "page-2", "page-3"]
    source.refresh_from_db()
    assert source.health == BillingSource.Health.HEALTHY


def test_the_last_days_are_restated_exactly_and_the_same_answer_changes_nothing(acme):
    with FakeProvider("openai") as provider:
        provider.days = {
            date(2025, 1, 5): [cost(1.5)],
            date(2025, 1, 31): [cost(0.25)],
            date(2025, 2, 1): [cost(2.0)],
            date(2025, 2, 2): [cost(0.5)],
        }
        source = api_source(BillingSource.Kind.OPENAI_API, provider.url)
        poll(source, FEB_3)
        jan = Delivery.objects.get(billing_period_start__month=1, status="current")

        # A day later the provider has corrected Feb 1 and Jan 31, dropped Feb 2 (a refund
        # restated to nothing) and added Feb 4; Jan 5 is outside the restated days and stays.
        provider.days[date(2025, 1, 5)] = [cost(99.0)]  # too old to be asked for again
        provider.days[date(2025, 1, 31)] = [cost(0.3)]
        provider.days[date(2025, 2, 1)] = [cost(2.25), cost(0.05, "gpt-4o, cached input")]
        del provider.days[date(2025, 2, 2)]
        provider.days[date(2025, 2, 4)] = [cost(1.0)]
        provider.calls.clear()
        second, _ = poll(source, FEB_3 + timedelta(days=1))

        # The window: three days before the last good poll (Feb 3) to today (Feb 4).
        params = dict(provider.calls[0][1])
        assert (params["start_time"], params["end_time"]) == ("1738281600", "1738713600")
        assert counts(second) == ("succeeded", 2, 0, 2, 0, 2)
        assert current_spend() == {
            ("openai", JAN): {"USD": "1.80"},
            ("openai", FEB): {"USD": "3.30"},
        }
        assert line_total() == Decimal("5.10")
        replaced = Delivery.objects.get(pk=jan.pk)
        assert replaced.status == Delivery.Status.REPLACED

        # The same answers again: the month files are the same, no run starts.
        third, runs = poll(source, FEB_3 + timedelta(days=1, hours=1))
        assert counts(third) == ("succeeded", 2, 0, 0, 2, 0)
        assert runs == []
        assert line_total() == Decimal("5.10")
        assert Delivery.objects.filter(status="current").count() == 2


def test_a_provider_that_is_down_marks_the_source_unhealthy_and_loses_nothing(acme, data_dir):
    with FakeProvider("openai") as provider:
        provider.days = {date(2025, 2, 1): [cost(2.0)], date(2025, 2, 2): [cost(0.5)]}
        source = api_source(BillingSource.Kind.OPENAI_API, provider.url)
        poll(source, FEB_3)
        state = api_sources.state_dir(source)
        before = {p.name: p.read_bytes() for p in state.rglob("*.json")}

        provider.down = True
        provider.days[date(2025, 2, 2)] = [cost(0.6)]
        with pytest.raises(SourceUnavailable, match="answered HTTP 503"):
            services_sources.billing_source_poll(source=source, now=FEB_3 + timedelta(days=1))
        source.refresh_from_db()
        assert source.health == BillingSource.Health.UNHEALTHY
        assert source.consecutive_failures == 1
        assert "/v1/organization/costs answered HTTP 503 Service Unavailable" in source.last_error
        assert source.last_error.endswith('"message": "Overloaded"}}')
        # Backed off: a minute past the interval.
        assert source.next_poll_at == FEB_3 + timedelta(days=1, minutes=61)

        # Up again, but the third page fails: nothing of the window is written.
        provider.down = False
        provider.fail_page = 3
        with pytest.raises(SourceUnavailable, match="answered HTTP 500"):
            services_sources.billing_source_poll(source=source, now=FEB_3 + timedelta(days=2))
        assert {p.name: p.read_bytes() for p in state.rglob("*.json")} == before
        assert current_spend() == {("openai", FEB): {"USD": "2.50"}}

        # Days later the provider answers: the window reaches back to the last good poll.
        provider.fail_page = None
        provider.days[date(2025, 2, 5)] = [cost(1.0)]
        provider.calls.clear()
        later, _ = poll(source, FEB_3 + timedelta(days=3))
        assert dict(provider.calls[0][1])["start_time"] == "1738281600"  # Jan 31
        assert counts(later) == ("succeeded", 1, 0, 1, 0, 1)
        assert current_spend() == {("openai", FEB): {"USD": "3.60"}}
        source.refresh_from_db()
        assert (source.health, source.consecutive_failures) == ("healthy", 0)


def test_a_missing_key_is_named_and_marks_the_source_unhealthy(acme, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_ADMIN_KEY")
    source = api_source(BillingSource.Kind.ANTHROPIC_API, "http://127.0.0.1:9")
    with pytest.raises(SourceUnavailable) as raised:
        services_sources.billing_source_poll(source=source, now=FEB_3)
    assert str(raised.value) == (
        "Anthropic: no API key; set ANTHROPIC_ADMIN_KEY in the environment of the web and "
        "worker processes."
    )
    source.refresh_from_db()
    assert (source.health, source.last_error) == ("unhealthy", str(raised.value))


def test_anthropic_cost_report_cents_with_the_admin_key_header(acme):
    with FakeProvider("anthropic") as provider:
        provider.days = {
            date(2025, 2, 1): [
                {
                    "currency": "USD",
                    "amount": "123.45",
                    "workspace_id": "wrkspc_a",
                    "description": "Claude Sonnet 4.5 output",
                    "cost_type": "tokens",
                    "model": "claude-sonnet-4-5",
                    "token_type": "output_tokens",
                }
            ],
            date(2025, 2, 3): [
                {
                    "currency": "USD",
                    "amount": "0.5",
                    "workspace_id": None,
                    "description": "Claude Haiku 4.5 cache read",
                    "cost_type": "tokens",
                    "model": "claude-haiku-4-5",
                    "token_type": "cache_read_input_tokens",
                }
            ],
        }
        source = api_source(BillingSource.Kind.ANTHROPIC_API, provider.url)
        first, _ = poll(source, FEB_3)
    path, params, headers = provider.calls[0]
    assert path == "/v1/organizations/cost_report"
    assert (headers["x-api-key"], headers["anthropic-version"]) == (
        "sk-ant-admin-test",
        "2023-06-01",
    )
    assert ("starting_at", "2025-01-01T00:00:00Z") in params
    assert ("ending_at", "2025-02-04T00:00:00Z") in params
    assert [v for k, v in params if k == "group_by[]"] == ["workspace_id", "description"]
    # January had no spend: one month file, one run.
    assert counts(first) == ("succeeded", 1, 1, 0, 0, 1)
    assert current_spend() == {("anthropic", FEB): {"USD": "1.2395"}}
    assert sorted(CostLineItem.objects.values_list("model", "token_direction", "billed_cost")) == [
        ("claude-haiku-4-5", "cached_input", Decimal("0.005")),
        ("claude-sonnet-4-5", "output", Decimal("1.2345")),
    ]


def test_openai_usage_and_anthropic_usage_reports_are_pulled_too(acme):
    with FakeProvider("openai") as openai, FakeProvider("anthropic") as anthropic:
        openai.days = {
            date(2025, 2, 2): [
                {
                    "object": "organization.usage.completions.result",
                    "input_tokens": 1000,
                    "output_tokens": 500,
                    "input_cached_tokens": 800,
                    "num_model_requests": 5,
                    "project_id": "proj_a",
                    "api_key_id": "key_a",
                    "model": "gpt-4o-mini",
                }
            ]
        }
        anthropic.days = {
            date(2025, 2, 2): [
                {
                    "uncached_input_tokens": 200,
                    "cache_read_input_tokens": 300,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 10,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": 40,
                    "server_tool_use": {"web_search_requests": 0},
                    "api_key_id": "apikey_a",
                    "workspace_id": "wrkspc_a",
                    "model": "claude-haiku-4-5",
                }
            ]
        }
        first, _ = poll(
            api_source(BillingSource.Kind.OPENAI_API, openai.url, "openai_usage"), FEB_3
        )
        second, _ = poll(
            api_source(BillingSource.Kind.ANTHROPIC_API, anthropic.url, "anthropic_usage"), FEB_3
        )
    assert openai.calls[0][0] == "/v1/organization/usage/completions"
    assert [v for k, v in openai.calls[0][1] if k == "group_by"] == [
        "project_id",
        "api_key_id",
        "model",
    ]
    assert anthropic.calls[0][0] == "/v1/organizations/usage_report/messages"
    assert (counts(first), counts(second)) == (("succeeded", 1, 1, 0, 0, 1),) * 2
    tokens = {
        (row["provider_name"], row["token_direction"]): row["tokens"]
        for row in CostLineItem.objects.values("provider_name", "token_direction", "tokens")
    }
    assert tokens == {
        ("OpenAI", "input"): Decimal(200),
        ("OpenAI", "cached_input"): Decimal(800),
        ("OpenAI", "output"): Decimal(500),
        ("Anthropic", "input"): Decimal(200),
        ("Anthropic", "cached_input"): Decimal(300),
        ("Anthropic", "cache_write"): Decimal(10),
        ("Anthropic", "output"): Decimal(40),
    }


def activity(day: str, model: str, usage: float, requests: int) -> dict:
    return {
        "date": day,
        "model": model,
        "model_permaslug": model,
        "endpoint_id": "ep-1",
        "provider_name": "Together",
        "usage": usage,
        "byok_usage_inference": 0,
        "requests": requests,
        "prompt_tokens": 1000 * requests,
        "completion_tokens": 100 * requests,
        "reasoning_tokens": 0,
    }


def test_openrouter_activity_takes_the_completed_days_of_the_window(acme):
    with FakeProvider("openrouter") as provider:
        provider.days = {
            date(2024, 12, 20): [activity("2024-12-20", "meta-llama/llama-3.3-70b", 5.0, 9)],
            date(2025, 1, 30): [activity("2025-01-30", "meta-llama/llama-3.3-70b", 1.25, 10)],
            date(2025, 2, 2): [
                activity("2025-02-02", "meta-llama/llama-3.3-70b", 0.5, 4),
                activity("2025-02-02", "deepseek/deepseek-r1", 0.75, 2),
            ],
        }
        source = api_source(BillingSource.Kind.OPENROUTER_API, provider.url)
        first, _ = poll(source, FEB_3)
    path, params, headers = provider.calls[0]
    assert (path, params, headers["authorization"]) == ("/api/v1/activity", [], "Bearer sk-or-test")
    # The last 30 completed days (Jan 4 to Feb 2): Dec 20 is not among them.
    assert counts(first) == ("succeeded", 2, 2, 0, 0, 2)
    assert current_spend() == {
        ("openrouter", JAN): {"USD": "1.25"},
        ("openrouter", FEB): {"USD": "1.25"},
    }


def spend_log(request_id: str, start: str, spend: str, key: str = "hash-a") -> dict:
    return {
        "request_id": request_id,
        "call_type": "acompletion",
        "api_key": key,
        "spend": spend,
        "total_tokens": 120,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "startTime": start,
        "endTime": start,
        "model": "gpt-4o-mini",
        "model_group": "gpt-4o-mini",
        "custom_llm_provider": "openai",
        "team_id": "team-search",
        "request_tags": ["service:ranker"],
        "status": "success",
    }


def test_litellm_spend_logs_follow_total_pages_and_count_each_request_once(acme):
    with FakeProvider("litellm") as provider:
        provider.days = {
            date(2025, 2, 1): [
                spend_log("req-1", "2025-02-01T10:00:00Z", "0.001"),
                spend_log("req-2", "2025-02-01 11:00:00", "0.002"),  # no zone: UTC
                spend_log("req-3", "2025-02-01T23:59:59Z", "0.004"),
            ],
            date(2025, 2, 3): [spend_log("req-4", "2025-02-03T08:00:00+00:00", "0.008", "hash-b")],
        }
        source = api_source(BillingSource.Kind.LITELLM_API, provider.url)
        first, _ = poll(source, FEB_3)
        provider.days[date(2025, 2, 3)].append(spend_log("req-5", "2025-02-03T09:00:00Z", "0.016"))
        second, _ = poll(source, FEB_3 + timedelta(hours=1))
    path, params, headers = provider.calls[0]
    assert path == "/spend/logs/ui"
    assert headers["authorization"] == "Bearer sk-litellm-test"
    assert dict(params) == {
        "start_date": "2025-01-01 00:00:00",
        "end_date": "2025-02-03 23:59:59",
        "page": "1",
        "page_size": "100",
    }
    assert counts(first) == ("succeeded", 1, 1, 0, 0, 1)
    assert counts(second) == ("succeeded", 1, 0, 1, 0, 1)
    assert current_spend() == {("litellm", FEB): {"USD": "0.031"}}
    # A line per day and key: Feb 1's three requests, Feb 3's of hash-a (req-5) and hash-b.
    lines = CostLineItem.objects.order_by("charge_period_start", "resource_id")
    assert list(lines.values_list("resource_id", "requests")) == [
        ("hash-a", Decimal(3)),
        ("hash-b", Decimal(1)),
        ("hash-a", Decimal(1)),
    ]


def test_a_litellm_source_needs_the_proxy_url(acme):
    source = api_source(BillingSource.Kind.LITELLM_API, "")
    with pytest.raises(SourceUnavailable, match=r"^LiteLLM: give the API's URL"):
        services_sources.billing_source_poll(source=source, now=FEB_3)


# -- the same files through a folder and a bucket ----------------------------------------------


def test_a_folder_source_takes_saved_api_pages_and_spend_logs(acme, tmp_path):
    from .formats import api_pages as pages
    from .test_sources import settle

    folder = tmp_path / "drop"
    (folder / "openai").mkdir(parents=True)
    (folder / "anthropic").mkdir()
    settle(pages.write_json(folder / "openai" / "costs.json", pages.openai_costs_page()), now=FEB_3)
    settle(
        pages.write_json(folder / "anthropic" / "cost.json", pages.anthropic_cost_page()),
        now=FEB_3,
    )
    settle(pages.write_litellm_csv(folder / "litellm.csv", pages.litellm_rows()), now=FEB_3)
    source = services_sources.billing_source_create(
        name="drop", kind=BillingSource.Kind.FOLDER, path=str(folder)
    )
    first, runs = poll(source, FEB_3)
    assert counts(first) == ("succeeded", 3, 3, 0, 0, 3)
    assert sorted(run.format for run in runs) == [
        "anthropic_cost",
        "litellm_spend_logs",
        "openai_costs",
    ]
    assert current_spend() == {
        ("anthropic", JAN): {"USD": "1.2395"},
        ("litellm", JAN): {"USD": "0.01625"},
        ("openai", JAN): {"USD": "3.91"},
    }
    again, runs = poll(source, FEB_3 + timedelta(hours=1))
    assert (counts(again), runs) == (("succeeded", 3, 0, 0, 3, 0), [])


def test_a_bucket_source_takes_saved_api_pages(acme, s3, tmp_path):  # noqa: F811
    from .formats import api_pages as pages

    s3.put(
        "api/openai/costs.json",
        pages.write_json(tmp_path / "c.json", pages.openai_costs_page()).read_bytes(),
    )
    s3.put(
        "api/anthropic/usage.json",
        pages.write_json(tmp_path / "u.json", pages.anthropic_usage_page()).read_bytes(),
    )
    source = services_sources.billing_source_create(
        name="bucket",
        kind=BillingSource.Kind.S3,
        bucket=s3.name,
        prefix="api/",
        endpoint_url=s3.server.url,
        region="us-east-1",
    )
    first, runs = poll(source, FEB_3)
    assert counts(first) == ("succeeded", 2, 2, 0, 0, 2)
    assert sorted(run.format for run in runs) == ["anthropic_usage", "openai_costs"]
    assert current_spend()[("openai", JAN)] == {"USD": "3.91"}
    assert ("anthropic", JAN) in current_spend()


def test_a_second_pull_while_one_is_under_way_takes_nothing_from_it(acme, monkeypatch):
    """A worker's poll and a "Poll now" of the same source at once, in one process: each pull
    stages its days in a folder of its own, so the one that ends first empties only its own."""
    with FakeProvider("openai") as provider:
        provider.days = {date(2025, 1, 5): [cost(1.5)], date(2025, 2, 1): [cost(2.0)]}
        source = api_source(BillingSource.Kind.OPENAI_API, provider.url)
        add, again = api_sources._DayWriter.add, []

        def add_then_pull_again(writer, item):
            add(writer, item)
            if not again:  # the other poll runs whole while this one has a day open
                again.append(None)
                again[0] = api_sources.pull(source, now=FEB_3)

        monkeypatch.setattr(api_sources._DayWriter, "add", add_then_pull_again)
        poll(source, FEB_3)
    assert [len(listing.files) for listing in again] == [2]
    assert line_total() == Decimal("3.50")
    assert not list((api_sources.state_dir(source)).glob(".staging-*"))
