"""The experiment page's metrics chart: a plain figure that plotly reads back as it is."""

import json

import plotly.graph_objects as go

from apps.experiments.charts import metrics_chart
from apps.experiments.selectors import MetricSeries
from costsite.charts import _figure_json


def test_plotly_reads_the_figure_back_unchanged():
    """Written as plain JSON without plotly's objects, the figure holds only what plotly's own
    validation and encoding would have made of it (a mistyped property fails here)."""
    chart = metrics_chart(
        series=[
            MetricSeries("train/loss", [0, 10, 20], [2.5, 1.75, 1.25]),
            MetricSeries("accuracy", [0, 10, 20], [0.1, 0.5, 0.9]),
            MetricSeries("learning rate", [5], [0.001]),
        ]
    )

    read_back = _figure_json(go.Figure(chart.figure))

    assert json.dumps(read_back, sort_keys=True) == json.dumps(chart.figure, sort_keys=True)


def test_the_loss_is_drawn_and_the_rest_is_a_click_away_in_the_legend():
    chart = metrics_chart(
        series=[
            MetricSeries("train/loss", [0, 10, 20], [2.5, 1.75, 1.25]),
            MetricSeries("learning rate", [5], [0.001]),
        ]
    )

    loss, rate = chart.figure["data"]
    assert (loss["name"], loss["x"], loss["y"]) == ("train/loss", [0, 10, 20], [2.5, 1.75, 1.25])
    assert (loss["mode"], loss["visible"]) == ("lines", True)
    assert (rate["mode"], rate["visible"]) == ("markers", "legendonly")


def test_without_a_loss_every_metric_is_drawn():
    chart = metrics_chart(series=[MetricSeries("accuracy", [0, 1], [0.25, 0.5])])

    assert chart.figure["data"][0]["visible"] is True


def test_a_value_json_cannot_hold_is_drawn_as_a_gap():
    """As plotly's own encoder wrote it: null, a gap in the line (the page's JSON stays valid)."""
    chart = metrics_chart(
        series=[MetricSeries("loss", [0, 1, 2, 3], [1.0, float("nan"), float("inf"), 0.5])]
    )

    assert chart.figure["data"][0]["y"] == [1.0, None, None, 0.5]
