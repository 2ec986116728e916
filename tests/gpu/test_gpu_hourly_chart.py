"""A GPU's usage chart, by hour or by day: a plain figure that plotly reads back as it is."""

import json
from datetime import UTC, date, datetime, timedelta

import plotly.graph_objects as go
from django.utils import timezone

from apps.gpu.charts import gpu_usage_chart
from apps.gpu.selectors import UsagePoint
from costsite.charts import _figure_json

FIRST = datetime(2025, 3, 29, 22, tzinfo=UTC)


def _hours(*readings: tuple[float | None, float | None, float | None]) -> list[UsagePoint]:
    return [
        UsagePoint(
            at=FIRST + timedelta(hours=index),
            util_mean=mean,
            util_max=peak,
            memory_percent=None if used is None else 100 * used / 81920.0,
        )
        for index, (mean, peak, used) in enumerate(readings)
    ]


def test_plotly_reads_the_figure_back_unchanged():
    """Written as plain JSON without plotly's objects, the figure holds only what plotly's own
    validation and encoding would have made of it, the idle line and its label included."""
    chart = gpu_usage_chart(
        points=_hours((4.25, 30.0, 40960.0), (None, None, None), (88.04, 100.0, 81920.0)),
        threshold=7.5,
    )

    read_back = _figure_json(go.Figure(chart.figure))

    assert json.dumps(read_back, sort_keys=True) == json.dumps(chart.figure, sort_keys=True)


def test_the_hours_utilisation_memory_and_idle_line():
    """Wall-clock hours of the organisation's zone (Berlin moves to summer time at 02:00 on 30
    March 2025), utilisation and memory in percent to a decimal, a gap where nothing was read."""
    with timezone.override("Europe/Berlin"):
        chart = gpu_usage_chart(
            points=_hours((4.25, 30.0, 40960.0), (None, None, None), (88.04, 100.0, 81920.0)),
            threshold=7.5,
        )
    traces = {trace["name"]: trace for trace in chart.figure["data"]}

    hours = ["2025-03-29T23:00:00", "2025-03-30T00:00:00", "2025-03-30T01:00:00"]
    assert traces["Mean utilisation"]["x"] == hours
    assert traces["Mean utilisation"]["y"] == [4.2, None, 88.0]
    assert traces["Peak utilisation"]["y"] == [30.0, None, 100.0]
    assert traces["Memory used"]["y"] == [50.0, None, 100.0]
    (idle,) = chart.figure["layout"]["shapes"]
    assert (idle["y0"], idle["y1"], idle["xref"]) == (7.5, 7.5, "x domain")
    assert chart.figure["layout"]["annotations"][0]["text"] == "idle under 7.5%"


def test_without_memory_readings_there_is_no_memory_line():
    chart = gpu_usage_chart(points=_hours((50.0, 60.0, None)), threshold=10.0)

    assert [trace["name"] for trace in chart.figure["data"]] == [
        "Mean utilisation",
        "Peak utilisation",
    ]


def test_by_day_the_points_are_the_utc_days_named_as_dates():
    """Over a long period the points are UTC days: the date itself on the axis, whatever the
    organisation's zone (a day's midnight would be the evening before in New York)."""
    days = [
        UsagePoint(at=date(2025, 3, 29), util_mean=12.345, util_max=90.0, memory_percent=None),
        UsagePoint(at=date(2025, 3, 30), util_mean=None, util_max=None, memory_percent=None),
    ]
    with timezone.override("America/New_York"):
        chart = gpu_usage_chart(points=days, threshold=10.0, by_day=True)
    mean, peak = chart.figure["data"]

    assert mean["x"] == ["2025-03-29", "2025-03-30"]
    assert (mean["y"], peak["y"]) == ([12.3, None], [90.0, None])
    assert mean["hovertemplate"] == (
        "%{x|%d %b %Y}: %{y:.1f}% mean (the day's hours)<extra></extra>"
    )
    assert chart.label == "Utilisation by day"
    assert (mean["mode"], mean["marker"]) == ("lines+markers", {"size": 4, "color": "#1f77b4"})
    read_back = _figure_json(go.Figure(chart.figure))
    assert json.dumps(read_back, sort_keys=True) == json.dumps(chart.figure, sort_keys=True)


def test_hours_are_dotted_only_where_readings_are_sparse():
    """Over a period, the hours with no reading are gaps; the lines carry dots where fewer than
    half the hours have a reading."""
    start = FIRST.replace(hour=0)
    week = (start, start + timedelta(days=1))
    sparse = gpu_usage_chart(points=_hours((4.25, 30.0, None)), threshold=7.5, period=week)
    dense = gpu_usage_chart(
        points=[
            UsagePoint(
                at=start + timedelta(hours=n), util_mean=50.0, util_max=60.0, memory_percent=None
            )
            for n in range(13)
        ],
        threshold=7.5,
        period=week,
    )

    mean = sparse.figure["data"][0]
    assert (len(mean["x"]), mean["y"][22], mean["y"][:22]) == (24, 4.2, [None] * 22)
    assert mean["mode"] == "lines+markers"
    assert {trace["mode"] for trace in dense.figure["data"]} == {"lines"}
