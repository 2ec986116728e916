"""The finding page's evidence chart, as the plain dict Plotly.js reads (costsite/charts.py)."""

from costsite.charts import Chart, chart_from_figure

from .models import FindingHour

IDLE_COLOUR = "#d62728"
SPEND_COLOUR = "#7f7f7f"
UNMEASURED_COLOUR = "#c7c7c7"


def evidence_chart(*, hours: list[FindingHour], currency: str) -> Chart:
    """Spend by hour (its wasted part in red, unmeasured hours pale) against the idle share."""
    rows = [row for row in hours if row.currency == currency]
    if not rows:
        return chart_from_figure(id="evidence-chart", figure=None, empty_message="No hours.")
    stamps = [row.hour.isoformat() for row in rows]
    figure = {
        "data": [
            {
                "type": "bar",
                "name": f"Wasted ({currency})",
                "x": stamps,
                "y": [float(row.wasted) for row in rows],
                "marker": {"color": IDLE_COLOUR},
            },
            {
                "type": "bar",
                "name": f"Rest of the spend ({currency})",
                "x": stamps,
                "y": [float(row.spend - row.wasted) for row in rows],
                "marker": {
                    "color": [SPEND_COLOUR if row.measured else UNMEASURED_COLOUR for row in rows]
                },
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Idle share",
                "x": stamps,
                "y": [None if row.idle_share is None else float(row.idle_share) for row in rows],
                "yaxis": "y2",
                "line": {"color": "#1f77b4"},
            },
        ],
        "layout": {
            "barmode": "stack",
            "yaxis": {"title": {"text": currency}},
            "yaxis2": {
                "overlaying": "y",
                "side": "right",
                "range": [0, 1],
                "tickformat": ".0%",
                "title": {"text": "Idle share (unmeasured: no point)"},
            },
        },
    }
    return chart_from_figure(
        id="evidence-chart", figure=figure, label="Spend by hour against the idle share"
    )
