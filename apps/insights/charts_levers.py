"""The inference levers' evidence charts (plain dicts Plotly.js reads, costsite/charts.py):
duplicates per hour, the zero-traffic hours shaded on the traffic timeline, utilisation against
traffic. The price and model comparisons are tables (_evidence_levers.html)."""

from costsite.charts import Chart, chart_from_figure

from .models import Finding, Kind

REQUESTS_COLOUR = "#1f77b4"
DUPLICATE_COLOUR = "#d62728"
ZERO_COLOUR = "rgba(214, 39, 40, 0.12)"
UTIL_COLOUR = "#ff7f0e"


def _duplicates(evidence: dict) -> dict | None:
    rows = evidence.get("duplicates_by_hour") or []
    if not rows:
        return None
    stamps = [row[0] for row in rows]
    return {
        "data": [
            {
                "type": "bar",
                "name": "Repeated requests",
                "x": stamps,
                "y": [row[2] for row in rows],
                "marker": {"color": DUPLICATE_COLOUR},
            },
            {
                "type": "bar",
                "name": "Other requests",
                "x": stamps,
                "y": [row[1] - row[2] for row in rows],
                "marker": {"color": REQUESTS_COLOUR},
            },
        ],
        "layout": {"barmode": "stack", "yaxis": {"title": {"text": "requests an hour"}}},
    }


def _timeline(evidence: dict, *, shade_zero: bool) -> dict | None:
    rows = evidence.get("timeline") or []
    if not rows:
        return None
    shapes = []
    if shade_zero:
        shapes = [
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": span["start"],
                "x1": span["end"],
                "y0": 0,
                "y1": 1,
                "fillcolor": ZERO_COLOUR,
                "line": {"width": 0},
            }
            for span in evidence.get("spans") or []
        ]
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "Requests",
                "x": [row[0] for row in rows],
                "y": [row[1] for row in rows],
                "line": {"color": REQUESTS_COLOUR, "shape": "hv"},
            },
            {
                "type": "bar",
                "name": "Spend",
                "x": [row[0] for row in rows],
                "y": [float(row[2]) for row in rows],
                "yaxis": "y2",
                "opacity": 0.4,
            },
        ],
        "layout": {
            "yaxis": {"title": {"text": "requests an hour"}},
            "yaxis2": {"overlaying": "y", "side": "right", "title": {"text": "spend"}},
            "shapes": shapes,
        },
    }


def _utilisation(evidence: dict) -> dict | None:
    rows = evidence.get("utilisation_by_hour") or []
    if not rows:
        return None
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "Requests",
                "x": [row[0] for row in rows],
                "y": [row[1] for row in rows],
                "line": {"color": REQUESTS_COLOUR},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "GPU utilisation (%)",
                "x": [row[0] for row in rows],
                "y": [None if row[2] is None else float(row[2]) for row in rows],
                "yaxis": "y2",
                "line": {"color": UTIL_COLOUR},
            },
        ],
        "layout": {
            "yaxis": {"title": {"text": "requests an hour"}},
            "yaxis2": {
                "overlaying": "y",
                "side": "right",
                "range": [0, 100],
                "title": {"text": "GPU utilisation (%)"},
            },
        },
    }


LABELS = {
    Kind.CACHE_REPEATS: "Repeated requests by hour",
    Kind.SCALE_TO_ZERO: "Traffic by hour, the hours without any shaded",
    Kind.BATCH_REQUESTS: "GPU utilisation against traffic",
    Kind.BATCH_NOT_REALTIME: "Traffic by hour",
    Kind.RIGHT_SIZE_SERVING: "GPU utilisation against traffic",
}


def lever_chart(*, finding: Finding) -> Chart | None:
    """The chart of an inference lever's finding (None: a table says it all, smaller_model)."""
    evidence = finding.evidence or {}
    if finding.kind == Kind.CACHE_REPEATS:
        figure = _duplicates(evidence)
    elif finding.kind == Kind.SCALE_TO_ZERO:
        figure = _timeline(evidence, shade_zero=True)
    elif finding.kind == Kind.BATCH_NOT_REALTIME:
        figure = _timeline(evidence, shade_zero=False)
    elif finding.kind in (Kind.BATCH_REQUESTS, Kind.RIGHT_SIZE_SERVING):
        figure = _utilisation(evidence)
    else:
        return None
    return chart_from_figure(
        id="evidence-chart",
        figure=figure,
        label=LABELS[finding.kind],
        empty_message="No hours to draw.",
    )
