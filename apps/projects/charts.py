"""Figures for the project page, built from selector output (costsite/charts.py's pattern)."""

from apps.experiments.models import Experiment
from costsite.charts import Chart, chart_from_figure

from .selectors import MonthStatusCount

# One colour per status, matching the badges in site.css.
STATUS_COLOURS = {
    Experiment.Status.PLANNED: "#9e9e9e",
    Experiment.Status.RUNNING: "#1565c0",
    Experiment.Status.SUCCEEDED: "#2e7d32",
    Experiment.Status.FAILED: "#c62828",
    Experiment.Status.STOPPED: "#ef6c00",
}


def experiments_by_month_chart(*, rows: list[MonthStatusCount]) -> Chart:
    """Stacked bars: runs started per month, one colour per status."""
    empty = "No experiments with a start time yet: the chart fills as runs are registered."
    if not rows:
        return chart_from_figure(id="experiments-by-month", figure=None, empty_message=empty)
    months = sorted({row.month for row in rows})
    labels = [month.strftime("%b %Y") for month in months]
    data = []
    for status, label in Experiment.Status.choices:
        counts = {row.month: row.count for row in rows if row.status == status}
        if not counts:
            continue
        data.append(
            {
                "type": "bar",
                "name": label,
                "x": labels,
                "y": [counts.get(month, 0) for month in months],
                "marker": {"color": STATUS_COLOURS[status]},
                "hovertemplate": "%{x}: %{y} " + label.lower() + "<extra></extra>",
            }
        )
    tallest = max(sum(row.count for row in rows if row.month == month) for month in months)
    yaxis = {"title": {"text": "experiments started"}, "rangemode": "tozero"}
    if tallest <= 10:
        yaxis["dtick"] = 1  # whole runs only: a few runs must not get ticks at 0.5
    # A plain dict, as Plotly.js reads it: plotly's objects validate every property (most of
    # the project page's chart time); these are fixed here and read back by the tests.
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "yaxis": yaxis,
            "xaxis": {"type": "category"},
            # Plotly lists stacked traces top first; the badges' order (planned...stopped) reads
            # better.
            "legend": {"traceorder": "normal"},
            "height": 320,
        },
    }
    return chart_from_figure(
        id="experiments-by-month",
        figure=figure,
        empty_message=empty,
        label="Experiments started per month, by status",
    )
