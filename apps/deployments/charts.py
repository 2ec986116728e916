"""Figures for the deployment page, built from selector output (costsite/charts.py's pattern)."""

from datetime import timedelta

from django.utils import timezone

from costsite.charts import WORKLOAD_COLOURS, Chart, chart_from_figure

from .models import Deployment
from .selectors import TrafficSummary

LATENCY_COLOUR = "#ff7f0e"


def traffic_chart(*, deployment: Deployment, traffic: TrafficSummary | None) -> Chart:
    """Requests per hour (repeated ones apart: what a cache would answer) with the p95 latency
    beside them, and the latency objective when there is one."""
    empty = (
        "No traffic reported yet: the serving stack sends requests, tokens and latency per hour "
        "through the API (POST …/deployments/<external id>/traffic)."
    )
    if traffic is None or not traffic.hours:
        return chart_from_figure(id="traffic", figure=None, empty_message=empty)
    # Shown in the organisation's time zone, like every time on the pages; each bar spans its
    # hour, so it is drawn at the hour's middle. The figure is the plain dict Plotly.js reads
    # (apps/spend/charts.py's reason: plotly's objects validated a fortnight of hours point by
    # point, half the page's time); tests/deployments/test_traffic_chart.py checks that plotly
    # reads it back unchanged.
    starts = [timezone.localtime(row.hour).replace(tzinfo=None) for row in traffic.hours]
    hours = [(start + timedelta(minutes=30)).isoformat() for start in starts]
    labels = [start.strftime("%-d %b %H:00") for start in starts]
    width = 3_600_000 * 0.9  # milliseconds: a bar nine tenths of its hour wide
    data = [
        {
            "type": "bar",
            "name": "requests",
            "x": hours,
            "y": [row.requests - row.duplicate_requests for row in traffic.hours],
            "width": width,
            "marker": {"color": WORKLOAD_COLOURS["inference"]},
            "customdata": labels,
            "hovertemplate": "%{customdata}: %{y:,} requests<extra></extra>",
        },
        {
            "type": "bar",
            "name": "repeated requests",
            "x": hours,
            "y": [row.duplicate_requests for row in traffic.hours],
            "width": width,
            "marker": {"color": "#98df8a"},
            "customdata": labels,
            "hovertemplate": "%{customdata}: %{y:,} repeated<extra></extra>",
        },
    ]
    p95 = [row.latency_p95_ms for row in traffic.hours]
    if any(value is not None for value in p95):
        data.append(
            {
                "type": "scatter",
                "name": "p95 latency (ms)",
                "x": hours,
                "y": p95,
                "yaxis": "y2",
                "mode": "lines+markers" if len(hours) < 50 else "lines",
                "line": {"color": LATENCY_COLOUR},
                "customdata": labels,
                "hovertemplate": "%{customdata}: p95 %{y:,.0f} ms<extra></extra>",
            }
        )
        if deployment.latency_objective_ms:
            data.append(
                {
                    "type": "scatter",
                    "name": "p95 objective",
                    "x": [starts[0].isoformat(), (starts[-1] + timedelta(hours=1)).isoformat()],
                    "y": [deployment.latency_objective_ms] * 2,
                    "yaxis": "y2",
                    "mode": "lines",
                    "line": {"color": LATENCY_COLOUR, "dash": "dot"},
                    "hoverinfo": "skip",
                }
            )
    layout = {
        "barmode": "stack",
        # Bars of one hour each: without a range, a single hour would fill the axis.
        "xaxis": {
            "type": "date",
            "range": [
                (starts[0] - timedelta(hours=1)).isoformat(),
                (starts[-1] + timedelta(hours=2)).isoformat(),
            ],
        },
        "legend": {"y": -0.25},
        "yaxis": {"title": {"text": "requests per hour"}, "rangemode": "tozero"},
        "yaxis2": {
            "title": {"text": "ms"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
        },
        "height": 320,
    }
    figure = {"data": data, "layout": layout}
    return chart_from_figure(
        id="traffic",
        figure=figure,
        empty_message=empty,
        label="Requests per hour and p95 latency",
    )
