"""The evidence charts of part 2's findings (plain dicts Plotly.js reads, costsite/charts.py):
the idle stretches on the utilisation timeline, the gaps between runs on the resource's
timeline, a run's utilisation against the target, the price comparison of right-size
candidates. `part2_chart` returns None for the other kinds (charts.evidence_chart draws them)."""

from costsite.charts import Chart, chart_from_figure

from .charts import IDLE_COLOUR, SPEND_COLOUR, UNMEASURED_COLOUR, evidence_chart
from .models import Finding, FindingHour, Kind

RUN_COLOUR = "rgba(44, 160, 44, 0.15)"
STRETCH_COLOUR = "rgba(214, 39, 40, 0.12)"
TARGET_COLOUR = "#ff7f0e"
UTIL_COLOUR = "#1f77b4"


def _spend_bars(rows: list[FindingHour], currency: str, wasted_name: str) -> list[dict]:
    stamps = [row.hour.isoformat() for row in rows]
    return [
        {
            "type": "bar",
            "name": f"{wasted_name} ({currency})",
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
    ]


def _bands(spans: list[dict], colour: str) -> list[dict]:
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": span["start"],
            "x1": span["end"] or spans[-1]["start"],
            "y0": 0,
            "y1": 1,
            "fillcolor": colour,
            "line": {"width": 0},
            "layer": "below",
        }
        for span in spans
    ]


def _notebook(finding: Finding, hours: list[FindingHour], currency: str) -> Chart:
    chart = evidence_chart(hours=hours, currency=currency)
    if chart.figure is None:
        return chart
    layout = chart.figure.setdefault("layout", {})
    layout["shapes"] = _bands(finding.evidence.get("stretches") or [], STRETCH_COLOUR)
    return Chart(
        id=chart.id,
        figure=chart.figure,
        label="Spend by hour against the idle share, the idle stretches shaded",
    )


def _between(finding: Finding, hours: list[FindingHour], currency: str) -> Chart:
    rows = [row for row in hours if row.currency == currency]
    if not rows:
        return chart_from_figure(id="evidence-chart", figure=None, empty_message="No hours.")
    runs = [
        {"start": run["start"], "end": run["end"] or rows[-1].hour.isoformat()}
        for run in finding.evidence.get("runs") or []
    ]
    figure = {
        "data": _spend_bars(rows, currency, "Billed between runs"),
        "layout": {
            "barmode": "stack",
            "yaxis": {"title": {"text": currency}},
            "shapes": _bands(runs, RUN_COLOUR),
        },
    }
    return chart_from_figure(
        id="evidence-chart",
        figure=figure,
        label="Spend by hour: the registered runs shaded, the hours between them in red",
    )


def _starved(finding: Finding, hours: list[FindingHour], currency: str) -> Chart:
    series = finding.evidence.get("utilisation") or []
    if not series:
        return chart_from_figure(
            id="evidence-chart", figure=None, empty_message="No GPU metrics while it ran."
        )
    target = float(finding.evidence.get("target_percent") or 0)
    mean = float(finding.evidence.get("mean_utilisation_percent") or 0)
    stamps = [point[0] for point in series]
    figure = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "GPU utilisation (%)",
                "x": stamps,
                "y": [point[1] for point in series],
                "line": {"color": UTIL_COLOUR},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"Target ({target:g}%)",
                "x": [stamps[0], stamps[-1]],
                "y": [target, target],
                "line": {"color": TARGET_COLOUR, "dash": "dash"},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"Mean while it ran ({mean:g}%)",
                "x": [stamps[0], stamps[-1]],
                "y": [mean, mean],
                "line": {"color": IDLE_COLOUR, "dash": "dot"},
            },
        ],
        "layout": {"yaxis": {"title": {"text": "%"}, "range": [0, 100]}},
    }
    return chart_from_figure(
        id="evidence-chart", figure=figure, label="The run's GPU utilisation against the target"
    )


def _right_size(finding: Finding, currency: str) -> Chart:
    current = finding.evidence.get("current")
    candidates = finding.evidence.get("candidates") or []
    if not current:
        return chart_from_figure(id="evidence-chart", figure=None, empty_message="No prices.")
    offers = [current, *candidates]
    figure = {
        "data": [
            {
                "type": "bar",
                "name": f"On-demand per hour ({currency})",
                "x": [
                    f"{offer['instance_type']} ({offer['gpu_count']} × {offer['gpu_type']})"
                    for offer in offers
                ],
                "y": [float(offer["on_demand_per_hour"]) for offer in offers],
                "marker": {
                    "color": [SPEND_COLOUR] + [UTIL_COLOUR] * len(candidates),
                },
            }
        ],
        "layout": {"yaxis": {"title": {"text": f"{currency} per hour"}}},
    }
    return chart_from_figure(
        id="evidence-chart",
        figure=figure,
        label="What it runs on against the cheaper instances that fit",
    )


def part2_chart(*, finding: Finding, hours: list[FindingHour], currency: str) -> Chart | None:
    if finding.kind == Kind.NOTEBOOK_LEFT_RUNNING:
        return _notebook(finding, hours, currency)
    if finding.kind == Kind.IDLE_BETWEEN_RUNS:
        return _between(finding, hours, currency)
    if finding.kind == Kind.DATA_STARVED:
        return _starved(finding, hours, currency)
    if finding.kind == Kind.RIGHT_SIZE:
        return _right_size(finding, currency)
    return None
