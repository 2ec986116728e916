"""The deployment page's traffic chart: a plain figure that plotly reads back as it is."""

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
from django.utils import timezone

from apps.deployments.charts import traffic_chart
from apps.deployments.models import Deployment, TrafficHour
from apps.deployments.selectors import TrafficSummary
from costsite.charts import _figure_json

FIRST = datetime(2025, 3, 20, 21, tzinfo=UTC)


def _traffic(p95: list[float | None]) -> TrafficSummary:
    hours = [
        TrafficHour(
            hour=FIRST + timedelta(hours=index),
            requests=1000 + index,
            duplicate_requests=10 * index,
            latency_p95_ms=latency,
        )
        for index, latency in enumerate(p95)
    ]
    return TrafficSummary(
        hours=hours,
        requests=sum(hour.requests for hour in hours),
        duplicate_requests=sum(hour.duplicate_requests for hour in hours),
        tokens_in=0,
        tokens_out=0,
        hours_over_objective=None,
    )


def _spelled(value) -> str:
    return json.dumps(value, sort_keys=True)


def test_plotly_reads_the_figure_back_unchanged():
    """Written as plain JSON without plotly's objects, the figure holds only what plotly's own
    validation and encoding would have made of it: every property known, every value as plotly
    writes it (a mistyped property name or a value plotly refuses fails here)."""
    chart = traffic_chart(
        deployment=Deployment(latency_objective_ms=300), traffic=_traffic([280.0, 320.0, None])
    )

    read_back = _figure_json(go.Figure(chart.figure))

    assert _spelled(read_back["data"]) == _spelled(chart.figure["data"])
    assert _spelled(read_back["layout"]) == _spelled(chart.figure["layout"])


def test_each_bar_is_drawn_at_its_hours_middle_in_the_organisations_time_zone():
    with timezone.override("Europe/Berlin"):
        chart = traffic_chart(
            deployment=Deployment(latency_objective_ms=300), traffic=_traffic([280.0, 320.0, None])
        )
    traces = {trace["name"]: trace for trace in chart.figure["data"]}

    # 21:00 UTC on 20 March 2025 is 22:00 in Berlin (winter time until the 30th).
    middles = ["2025-03-20T22:30:00", "2025-03-20T23:30:00", "2025-03-21T00:30:00"]
    assert traces["requests"]["x"] == middles
    assert traces["requests"]["y"] == [1000, 991, 982]
    assert traces["repeated requests"]["y"] == [0, 10, 20]
    assert traces["requests"]["width"] == 3_240_000.0
    assert traces["requests"]["customdata"] == ["20 Mar 22:00", "20 Mar 23:00", "21 Mar 00:00"]
    assert traces["p95 latency (ms)"]["y"] == [280.0, 320.0, None]
    assert traces["p95 latency (ms)"]["mode"] == "lines+markers"
    assert traces["p95 objective"]["x"] == ["2025-03-20T22:00:00", "2025-03-21T01:00:00"]
    assert traces["p95 objective"]["y"] == [300, 300]
    assert chart.figure["layout"]["xaxis"]["range"] == [
        "2025-03-20T21:00:00",
        "2025-03-21T02:00:00",
    ]


def test_without_latency_there_is_no_latency_line_and_no_objective():
    chart = traffic_chart(
        deployment=Deployment(latency_objective_ms=300), traffic=_traffic([None] * 60)
    )

    assert [trace["name"] for trace in chart.figure["data"]] == ["requests", "repeated requests"]


def test_a_long_latency_line_is_drawn_without_markers():
    chart = traffic_chart(deployment=Deployment(), traffic=_traffic([250.0] * 50))

    names = [trace["name"] for trace in chart.figure["data"]]
    assert names == ["requests", "repeated requests", "p95 latency (ms)"]
    assert chart.figure["data"][2]["mode"] == "lines"
