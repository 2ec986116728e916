"""Figures of the attribution pages, built from selector output (costsite/charts.py's pattern).

Amounts go to Plotly as floats rounded to the cent: a chart is read, not added up; the tables and
the CSV exports keep the exact decimals.
"""

from decimal import ROUND_HALF_UP, Decimal

from apps.billing.models import CostKind
from apps.projects.models import Workload
from costsite.charts import WORKLOAD_COLOURS, Chart, chart_from_figure, plot_text

from .selectors import Pareto, SpendSeries

# Cost kinds get their own palette; workloads keep theirs everywhere (costsite/charts.py).
COST_KIND_COLOURS = {
    "gpu_compute": "#1f77b4",
    "cpu_compute": "#aec7e8",
    "storage": WORKLOAD_COLOURS["storage"],
    "network": WORKLOAD_COLOURS["network"],
    "other": WORKLOAD_COLOURS["other"],
}
CUMULATIVE_COLOUR = "#d62728"
PARETO_BARS = 30  # past this, the rest is one bar: a chart of a hundred bars reads as noise
LABELS = {
    "workload": dict(Workload.choices),
    "cost_kind": dict(CostKind.choices),
    "component": {**dict(Workload.choices), "storage": "Storage"},
}
COLOURS = {
    "workload": WORKLOAD_COLOURS,
    "cost_kind": COST_KIND_COLOURS,
    "component": WORKLOAD_COLOURS,
}


def _figure(data: list[dict], layout: dict) -> dict:
    """The figure as the plain dict Plotly.js reads, without plotly's objects: they copied each
    property and validated it, 40 ms of the overview's three charts on the benchmark machine (a
    figure without validation still took 6 ms). Every property here is fixed in code and covered
    by the tests that read the figures back."""
    return {"data": data, "layout": layout}


def plot_amount(amount: Decimal) -> float:
    return float(amount.quantize(Decimal("0.01"), ROUND_HALF_UP))


def _money_axis(currency: str) -> dict:
    return {"title": {"text": f"spend ({currency})"}, "rangemode": "tozero", "tickformat": ",.0f"}


def spend_over_time_chart(
    *, series: SpendSeries, currency: str, id: str = "spend-over-time", empty_message: str = ""
) -> Chart:
    """Stacked bars: spend per day (or month), one colour per workload (or cost kind)."""
    empty = empty_message or (
        "No spend in this period: pick a longer range, clear a filter, or import a bill "
        "(python manage.py import_billing)."
    )
    if series.is_empty:
        return chart_from_figure(id=id, figure=None, empty_message=empty)
    labels, colours = LABELS[series.by], COLOURS[series.by]
    when = "%d %b %Y" if series.bucket == "day" else "%b %Y"
    x = [bucket.isoformat() for bucket in series.buckets]
    data = []
    for key in series.keys:
        label = labels.get(key, key)
        data.append(
            {
                "type": "bar",
                "name": label,
                "x": x,
                "y": [plot_amount(amount) for amount in series.values[key]],
                "marker": {"color": colours.get(key, WORKLOAD_COLOURS["other"])},
                # The name is referred to, not written in: costsite/charts.py escapes it.
                "hovertemplate": f"%{{x|{when}}}: %{{y:,.2f}} {plot_text(currency)}"
                "<extra>%{fullData.name}</extra>",
            }
        )
    figure = _figure(
        data,
        {
            "barmode": "stack",
            "xaxis": {
                "type": "date",
                "tickformat": "%-d %b" if series.bucket == "day" else "%b %Y",
                # Rollup days are UTC days, as bills are: the axis says so.
                "title": {"text": "UTC days" if series.bucket == "day" else "months (UTC days)"},
            },
            "yaxis": _money_axis(currency),
            "legend": {"traceorder": "normal", "y": -0.2},
            "height": 340,
        },
    )
    per = "day" if series.bucket == "day" else "month"
    return chart_from_figure(
        id=id,
        figure=figure,
        empty_message=empty,
        label=f"Spend per {per} by {series.by.replace('_', ' ')}",
    )


def pareto_chart(*, pareto: Pareto, currency: str, id: str) -> Chart:
    """Bars by spend, costliest first, with the cumulative share as a line (right axis) and the
    80% mark: a few things drive most of the spend."""
    empty = f"No {pareto.noun} with spend in this period."
    if not pareto.items:
        return chart_from_figure(id=id, figure=None, empty_message=empty)
    shown = pareto.items[:PARETO_BARS]
    names = [item.name for item in shown]
    # Long names are cut on the axis (the hover and the table give them whole).
    ticks = [name if len(name) <= 18 else name[:17] + "…" for name in names]
    amounts = [plot_amount(item.amount) for item in shown]
    cumulative = [float(round(item.cumulative_share * 100, 1)) for item in shown]
    shares = [float(round(item.share * 100, 1)) for item in shown]
    rest = pareto.items[PARETO_BARS:]
    if rest:
        shares.append(float(round(sum((item.share for item in rest), Decimal(0)) * 100, 1)))
        names.append(f"{len(rest)} others")
        ticks.append(names[-1])
        amounts.append(plot_amount(sum((item.amount for item in rest), Decimal(0))))
        cumulative.append(100.0)
    bars = {
        "type": "bar",
        "name": "spend",
        "x": names,
        "y": amounts,
        "marker": {"color": WORKLOAD_COLOURS["training"]},
        # The whole name (the axis may cut it), its spend and its share, on hover.
        "customdata": shares,
        "hovertemplate": f"%{{x}}: %{{y:,.2f}} {plot_text(currency)}"
        " · %{customdata:.1f}% of the spend<extra></extra>",
    }
    line = {
        "type": "scatter",
        "name": "cumulative share",
        "x": names,
        "y": cumulative,
        "yaxis": "y2",
        "mode": "lines+markers",
        "line": {"color": CUMULATIVE_COLOUR},
        "hovertemplate": "%{x}: %{y:.1f}% of the spend so far<extra></extra>",
    }
    layout = dict(
        xaxis={
            "type": "category",
            "tickangle": -45 if len(names) > 6 else 0,
            "tickmode": "array",
            "tickvals": names,
            "ticktext": ticks,
            "automargin": True,
        },
        yaxis=_money_axis(currency),
        # The right axis is the running share (the red line); its ticks say so with their "%".
        yaxis2={
            "overlaying": "y",
            "side": "right",
            "range": [0, 105],
            "ticksuffix": "%",
        },
        shapes=[
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y2",
                "y0": 80,
                "y1": 80,
                "line": {"color": CUMULATIVE_COLOUR, "dash": "dot", "width": 1},
            }
        ],
        showlegend=False,
        height=340,
    )
    return chart_from_figure(
        id=id,
        figure=_figure([bars, line], layout),
        empty_message=empty,
        label=pareto.headline or f"Spend by {pareto.noun}",
    )
