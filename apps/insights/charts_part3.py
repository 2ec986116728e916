"""Part 3's evidence charts (the loss curve with its plateau, a commitment's use over time) and
the waste page's coverage of GPU spend by commitments, as plain dicts Plotly.js reads."""

from costsite.charts import Chart, chart_from_figure

PLATEAU_COLOUR = "#d62728"
SERIES = (
    ("committed", "Committed", "#2ca02c"),
    ("on_demand", "On-demand", "#1f77b4"),
    ("spot", "Spot", "#ff7f0e"),
    ("other", "Other", "#7f7f7f"),
)


def loss_chart(*, evidence: dict) -> Chart:
    """The run's loss by step, the plateau shaded from its first step on."""
    points = evidence.get("points") or []
    if not points:
        return chart_from_figure(id="evidence-chart", figure=None, empty_message="No loss points.")
    plateau = evidence.get("plateau_step")
    figure = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": evidence.get("metric", "loss"),
                "x": [step for step, _value in points],
                "y": [value for _step, value in points],
                "line": {"color": "#1f77b4"},
            }
        ],
        "layout": {
            "xaxis": {"title": {"text": "step"}},
            "yaxis": {"title": {"text": evidence.get("metric", "loss")}},
            "shapes": [
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": plateau,
                    "x1": points[-1][0],
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": PLATEAU_COLOUR,
                    "opacity": 0.12,
                    "line": {"width": 0},
                }
            ],
            "annotations": [
                {
                    "x": plateau,
                    "y": 1,
                    "xref": "x",
                    "yref": "paper",
                    "text": f"plateau from step {plateau}",
                    "showarrow": False,
                    "xanchor": "left",
                }
            ],
        },
    }
    return chart_from_figure(
        id="evidence-chart", figure=figure, label="The loss by step, the plateau shaded"
    )


def commitment_chart(*, evidence: dict, currency: str) -> Chart:
    """The commitment's used and unused EffectiveCost per day."""
    rows = [row for row in evidence.get("use") or [] if row[1] == currency]
    if not rows:
        return chart_from_figure(id="evidence-chart", figure=None, empty_message="No use data.")
    days = [row[0] for row in rows]
    figure = {
        "data": [
            {
                "type": "bar",
                "name": f"Used ({currency})",
                "x": days,
                "y": [float(row[2]) for row in rows],
                "marker": {"color": "#2ca02c"},
            },
            {
                "type": "bar",
                "name": f"Unused ({currency})",
                "x": days,
                "y": [float(row[3]) for row in rows],
                "marker": {"color": PLATEAU_COLOUR},
            },
        ],
        "layout": {"barmode": "stack", "yaxis": {"title": {"text": currency}}},
    }
    return chart_from_figure(
        id="evidence-chart", figure=figure, label="The commitment's use per day, used and unused"
    )


def coverage_chart(*, rows: list[dict], currency: str) -> Chart:
    """GPU compute spend per day: committed, on-demand and spot, stacked."""
    if not rows:
        return chart_from_figure(
            id="coverage-chart", figure=None, empty_message="No GPU spend in the period."
        )
    days = [row["day"].isoformat() for row in rows]
    data = [
        {
            "type": "bar",
            "name": label,
            "x": days,
            "y": [float(row[key]) for row in rows],
            "marker": {"color": colour},
        }
        for key, label, colour in SERIES
        if any(row[key] for row in rows)
    ]
    figure = {"data": data, "layout": {"barmode": "stack", "yaxis": {"title": {"text": currency}}}}
    return chart_from_figure(
        id="coverage-chart",
        figure=figure,
        label="GPU spend per day by how it was bought: committed, on-demand, spot",
    )
