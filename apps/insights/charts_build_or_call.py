"""The build-or-call chart: monthly cost against requests an hour for both options, as the plain
dict Plotly.js reads (costsite/charts.py). Floats only for drawing: the page's figures are the
Decimals of build_or_call.Result."""

from decimal import Decimal

from costsite.charts import Chart, chart_from_figure

from .build_or_call import HOURS_PER_MONTH, Result, effective_capacity

SELF_COLOUR = "#2ca02c"  # inference's colour on every chart
API_COLOUR = "#1f77b4"
EVEN_COLOUR = "#d62728"
MOST_STEPS = 200


def _f(value: Decimal) -> float:
    return float(value.quantize(Decimal("0.01")))


def _percentile(values: list[int], share: Decimal) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * (len(ordered) - 1)))]


def _axis_end(result: Result) -> Decimal:
    candidates = [result.requests_per_hour * 3, result.volume * 2, Decimal(10)]
    if result.break_even_requests_per_hour is not None:
        candidates.append(result.break_even_requests_per_hour * 2)
    if result.shape.peak:
        candidates.append(Decimal(result.shape.peak) * Decimal("1.2"))
    return max(candidates)


def _self_hosted_points(result: Result, end: Decimal) -> tuple[list[float], list[float]]:
    """Vertices of the step line: a vertical jump at each replica's capacity."""
    capacity = effective_capacity(result.capacity, result.shape.peak_to_mean)
    xs, ys = [0.0], [_f(result.self_hosted_monthly_at(Decimal(0)))]
    if capacity is not None and end / capacity <= MOST_STEPS:
        step = 1
        while capacity * step < end:
            at = capacity * step
            xs += [_f(at), _f(at)]
            # Worked out from the step, not from at / capacity (whose last digit may round up).
            here = step * result.replica_monthly_cost + result.engineering_monthly_cost
            ys += [_f(here), _f(here + result.replica_monthly_cost)]  # one replica more
            step += 1
    elif capacity is not None:
        # Too many replicas to draw each step: sample the curve.
        points = [end * index / MOST_STEPS for index in range(1, MOST_STEPS + 1)]
        xs += [_f(x) for x in points]
        ys += [_f(result.self_hosted_monthly_at(x)) for x in points]
    xs.append(_f(end))
    ys.append(_f(result.self_hosted_monthly_at(end)))
    return xs, ys


def build_or_call_chart(*, result: Result) -> Chart:
    currency = result.inputs.currency
    end = _axis_end(result)
    xs, ys = _self_hosted_points(result, end)
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "Self-hosted (replica steps)",
            "x": xs,
            "y": ys,
            "line": {"color": SELF_COLOUR, "width": 3},
        }
    ]
    if result.api_per_request is not None:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"API: {result.inputs.api.name}",
                "x": [0.0, _f(end)],
                "y": [0.0, _f(result.api_per_request * end * HOURS_PER_MONTH)],
                "line": {"color": API_COLOUR, "width": 3},
            }
        )
    shapes, annotations = [], []
    hourly = list(result.inputs.hourly_requests)
    if result.requests:
        low, high = _percentile(hourly, Decimal("0.1")), _percentile(hourly, Decimal("0.9"))
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": low,
                "x1": high,
                "y0": 0,
                "y1": 1,
                "fillcolor": SELF_COLOUR,
                "opacity": 0.1,
                "line": {"width": 0},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "Real volume (mean; band: 10th-90th percentile hour)",
                "x": [_f(result.requests_per_hour)],
                "y": [_f(result.self_hosted_cost / result.hours * HOURS_PER_MONTH)],
                "marker": {"color": SELF_COLOUR, "size": 12, "symbol": "diamond"},
            }
        )
    if result.inputs.expected_requests_per_hour is not None:
        shapes.append(_vertical(result.volume, "#7f7f7f"))
        annotations.append(_label(result.volume, "expected"))
    if result.break_even_requests_per_hour is not None:
        shapes.append(_vertical(result.break_even_requests_per_hour, EVEN_COLOUR))
        annotations.append(_label(result.break_even_requests_per_hour, "break-even"))
    figure = {
        "data": data,
        "layout": {
            "xaxis": {"title": {"text": "requests an hour"}, "rangemode": "tozero"},
            "yaxis": {
                "title": {"text": f"cost a month ({currency})"},
                "rangemode": "tozero",
                "tickformat": ",.0f",
            },
            "legend": {"orientation": "h", "y": -0.3},
            "margin": {"b": 90},
            "shapes": shapes,
            "annotations": annotations,
        },
    }
    return chart_from_figure(
        id="build-or-call-chart",
        figure=figure,
        label="Monthly cost against requests an hour, self-hosted and called",
    )


def _vertical(x: Decimal, colour: str) -> dict:
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": _f(x),
        "x1": _f(x),
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "dash": "dash"},
    }


def _label(x: Decimal, text: str) -> dict:
    return {"x": _f(x), "y": 1, "xref": "x", "yref": "paper", "text": text, "showarrow": False}
