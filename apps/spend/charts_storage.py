"""Figures of the storage and egress page (plain dicts, as apps/spend/charts.py builds them).

Bytes go to Plotly in GiB (binary, as the page's tables show them), money rounded to the cent.
"""

from apps.billing.storage import DataClass
from costsite.charts import Chart, chart_from_figure, plot_text

from .charts import plot_amount
from .storage import Forecast, Growth

GIB = float(2**30)
DATA_CLASS_COLOURS = {
    "dataset": "#1f77b4",
    "checkpoints": "#ff7f0e",
    "artefacts": "#2ca02c",
    "vector-db": "#9467bd",
    "logs": "#8c564b",
    "unclassified": "#7f7f7f",
}
BAND_COLOUR = "rgba(214, 39, 40, 0.15)"
FORECAST_COLOUR = "#d62728"


def _gib(value) -> float:
    """Bytes in GiB to three decimals, as Plotly draws them (a float: no exact decimal needed)."""
    return round(float(value) / GIB, 3)


def _stacked(growth: Growth, *, bytes_: bool, id: str, currency: str) -> Chart:
    empty = "No storage in this period: import a bill with storage lines."
    if growth.is_empty:
        return chart_from_figure(id=id, figure=None, empty_message=empty)
    source = growth.bytes_by_class if bytes_ else growth.spend_by_class
    x = [d.isoformat() for d in growth.days]
    unit = "GiB" if bytes_ else plot_text(currency)
    data = [
        {
            "type": "bar",
            "name": DataClass.LABELS.get(name, name),
            "x": x,
            "y": [_gib(v) if bytes_ else plot_amount(v) for v in values],
            "marker": {"color": DATA_CLASS_COLOURS.get(name, "#7f7f7f")},
            "hovertemplate": f"%{{x|%d %b %Y}}: %{{y:,.2f}} {unit}"
            "<extra>%{fullData.name}</extra>",
        }
        for name, values in source.items()
    ]
    layout = {
        "barmode": "stack",
        "bargap": 0.05,
        "xaxis": {"type": "date", "tickformat": "%-d %b", "title": {"text": "UTC days"}},
        "yaxis": {
            "title": {"text": "stored (GiB)" if bytes_ else f"storage spend per day ({currency})"},
            "rangemode": "tozero",
        },
        "legend": {"traceorder": "normal", "y": -0.2},
        "height": 320,
    }
    label = (
        "Bytes stored per day by data class" if bytes_ else "Storage spend per day by data class"
    )
    return chart_from_figure(
        id=id, figure={"data": data, "layout": layout}, label=label, empty_message=empty
    )


def storage_bytes_chart(growth: Growth) -> Chart:
    return _stacked(growth, bytes_=True, id="storage-bytes", currency="")


def storage_spend_chart(growth: Growth, currency: str) -> Chart:
    return _stacked(growth, bytes_=False, id="storage-spend", currency=currency)


def forecast_chart(growth: Growth, forecast: Forecast | None) -> Chart:
    """The stored bytes so far, and the next 90 days with their 95% band (a filled area)."""
    empty = "Too little history to forecast: 14 days of storage that changes are needed."
    if forecast is None:
        return chart_from_figure(id="storage-forecast", figure=None, empty_message=empty)
    history = {
        "type": "scatter",
        "mode": "lines",
        "name": "stored",
        "x": [d.isoformat() for d in growth.days],
        "y": [_gib(v) for v in growth.total_bytes],
        "line": {"color": "#1f77b4"},
        "hovertemplate": "%{x|%d %b %Y}: %{y:,.1f} GiB<extra></extra>",
    }
    x = [d.isoformat() for d in forecast.days]
    lower = {
        "type": "scatter",
        "mode": "lines",
        "name": "95% band",
        "x": x,
        "y": [v / GIB for v in forecast.lower],
        "line": {"width": 0},
        "showlegend": False,
        "hoverinfo": "skip",
    }
    upper = {
        "type": "scatter",
        "mode": "lines",
        "name": "95% band",
        "x": x,
        "y": [v / GIB for v in forecast.upper],
        "fill": "tonexty",
        "fillcolor": BAND_COLOUR,
        "line": {"width": 0},
        "hovertemplate": "%{x|%d %b %Y}: up to %{y:,.1f} GiB<extra></extra>",
    }
    mean = {
        "type": "scatter",
        "mode": "lines",
        "name": "forecast",
        "x": x,
        "y": [v / GIB for v in forecast.mean],
        "line": {"color": FORECAST_COLOUR, "dash": "dash"},
        "hovertemplate": "%{x|%d %b %Y}: %{y:,.1f} GiB expected<extra></extra>",
    }
    layout = {
        "xaxis": {"type": "date", "tickformat": "%-d %b", "title": {"text": "UTC days"}},
        "yaxis": {"title": {"text": "stored (GiB)"}, "rangemode": "tozero"},
        "legend": {"y": -0.2},
        "height": 320,
    }
    return chart_from_figure(
        id="storage-forecast",
        figure={"data": [history, lower, upper, mean], "layout": layout},
        label="Bytes stored and the 90-day forecast with its 95% band",
        empty_message=empty,
    )


def egress_weekly_chart(weekly: dict, currency: str) -> Chart:
    empty = "No transfer in this period."
    if not weekly["series"]:
        return chart_from_figure(id="egress-weekly", figure=None, empty_message=empty)
    x = [w.isoformat() for w in weekly["weeks"]]
    data = [
        {
            "type": "bar",
            "name": name,
            "x": x,
            "y": [plot_amount(v) for v in values],
            "hovertemplate": f"week of %{{x|%d %b}}: %{{y:,.2f}} {plot_text(currency)}"
            "<extra>%{fullData.name}</extra>",
        }
        for name, values in weekly["series"].items()
    ]
    layout = {
        "barmode": "stack",
        "xaxis": {"type": "date", "tickformat": "%-d %b", "title": {"text": "weeks (UTC days)"}},
        "yaxis": {"title": {"text": f"transfer spend ({currency})"}, "rangemode": "tozero"},
        "legend": {"y": -0.2},
        "height": 280,
    }
    return chart_from_figure(
        id="egress-weekly",
        figure={"data": data, "layout": layout},
        label="Transfer spend per week by project",
        empty_message=empty,
    )
