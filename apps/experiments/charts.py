"""Figures for the experiment page, built from selector output (costsite/charts.py's pattern)."""

import math

from costsite.charts import Chart, chart_from_figure

from .selectors import MetricSeries


def metrics_chart(*, series: list[MetricSeries]) -> Chart:
    """One line per metric by training step. The loss curves are drawn; other metrics (accuracy,
    learning rate) are one click away in the legend, as their scales rarely match the loss's."""
    empty = (
        "No metrics reported yet: a training script sends its loss by step through the API "
        "(see “Registering runs from a training script” in the README)."
    )
    if not series:
        return chart_from_figure(id="metrics", figure=None, empty_message=empty)
    has_loss = any("loss" in one.name.lower() for one in series)
    # The plain dict Plotly.js reads (apps/spend/charts.py's reason: plotly's objects validate
    # each point); tests/experiments/test_metrics_chart.py checks plotly reads it back unchanged.
    data = [
        {
            "type": "scatter",
            "name": one.name,
            "x": list(one.steps),
            # None where plotly would write null: a value JSON cannot hold (none is stored today).
            "y": [value if math.isfinite(value) else None for value in one.values],
            "mode": "lines" if len(one.steps) > 1 else "markers",
            "visible": True if not has_loss or "loss" in one.name.lower() else "legendonly",
            # The name is referred to, not written in: costsite/charts.py escapes it.
            "hovertemplate": "step %{x}: %{y}<extra>%{fullData.name}</extra>",
        }
        for one in series
    ]
    figure = {
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": "step"}, "rangemode": "tozero"},
            "yaxis": {"title": {"text": "value"}},
            "height": 320,
        },
    }
    return chart_from_figure(
        id="metrics", figure=figure, empty_message=empty, label="Metrics by training step"
    )
