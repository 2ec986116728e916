"""The storage and egress findings' evidence chart: the subject's days, bytes held against its
spend and what of it the finding counts as wasted (plain dicts Plotly.js reads)."""

from costsite.charts import Chart, chart_from_figure

WASTED_COLOUR = "#d62728"
GIB = 2**30


def storage_chart(*, evidence: dict, currency: str) -> Chart | None:
    """Per day: storage spend (bars, wasted part in red) and GiB held (line, right axis). None
    for a finding without days (data far from the GPUs: its region pairs are a table)."""
    rows = [row for row in evidence.get("storage_days") or [] if row[1] == currency]
    if not rows:
        return None
    days = [row[0] for row in rows]
    wasted = [float(row[4]) for row in rows]
    data = [
        {
            "type": "bar",
            "name": f"Spend counted ({currency})",
            "x": days,
            "y": [float(row[3]) - w for row, w in zip(rows, wasted, strict=True)],
            "marker": {"color": "#1f77b4"},
        },
        {
            "type": "bar",
            "name": f"Wasted ({currency})",
            "x": days,
            "y": wasted,
            "marker": {"color": WASTED_COLOUR},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "GiB held",
            "x": days,
            "y": [float(row[2]) / GIB for row in rows],
            "yaxis": "y2",
            "line": {"color": "#2ca02c"},
        },
    ]
    if not any(wasted):
        data.pop(1)
        data[0]["name"] = f"Spend ({currency})"
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "yaxis": {"title": {"text": currency}},
            "yaxis2": {"title": {"text": "GiB"}, "overlaying": "y", "side": "right"},
        },
    }
    return chart_from_figure(
        id="evidence-chart",
        figure=figure,
        label="Storage spend per day (wasted part marked) and the bytes held",
    )
