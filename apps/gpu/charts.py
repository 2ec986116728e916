"""Figures for the GPU pages, built from selector output (the chart pattern of costsite/charts)."""

from datetime import timedelta

from django.utils import timezone

from costsite.charts import Chart, chart_from_figure

from .selectors import BAND_COLOURS, BANDS, Fleet, GroupUsage, UsagePoint, band_labels

# Longer ranges are drawn by month, as the spend pages' charts draw them.
DAILY_UNTIL_DAYS = 92


def fleet_bands_chart(*, fleet: Fleet) -> Chart:
    """Stacked bars: GPU-hours per UTC day, by how busy each GPU-hour was."""
    empty = (
        "No GPU-hours in this period: add a metric source or import a metrics file "
        "(python manage.py import_gpu_metrics)."
    )
    if not fleet.days:
        return chart_from_figure(id="fleet-bands", figure=None, empty_message=empty)
    first = fleet.start or min(row.day for row in fleet.days)
    last = fleet.end - timedelta(days=1)
    days = [first + timedelta(days=number) for number in range((last - first).days + 1)]
    # Longer ranges by month, as the spend charts draw them: a year of daily bars is unreadable.
    monthly = len(days) > DAILY_UNTIL_DAYS
    if monthly:
        days = sorted({day.replace(day=1) for day in days})
    labels = band_labels(threshold=fleet.threshold)
    x = [day.isoformat() for day in days]
    # The rows summed per band and bar in one pass (a year is about 1,400 of them).
    by_band: dict[str, dict] = {band: {} for band in BANDS}
    for row in fleet.days:
        day = row.day.replace(day=1) if monthly else row.day
        hours = by_band[row.band]
        hours[day] = hours.get(day, 0.0) + row.gpu_hours
    data = []
    for band in BANDS:
        hours = by_band[band]
        data.append(
            {
                "type": "bar",
                "name": labels[band],
                "x": x,
                "y": [round(hours.get(day, 0.0), 2) for day in days],
                "marker": {"color": BAND_COLOURS[band]},
                "hovertemplate": ("%{x|%b %Y}" if monthly else "%{x|%d %b}")
                + ": %{y:,.1f} GPU-hours "
                + labels[band].lower()
                + "<extra></extra>",
            }
        )
    # A plain dict, not plotly's objects, which copy and validate every property (the spend
    # charts' rule, apps/spend/charts.py): 20 ms of the fleet page's three charts.
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "height": 340,
            "yaxis": {"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
            "xaxis": {"type": "date", "tickformat": "%b %Y" if monthly else "%d %b"},
        },
    }
    return chart_from_figure(
        id="fleet-bands",
        figure=figure,
        empty_message=empty,
        label=f"GPU-hours per {'month' if monthly else 'day'} by utilisation band",
    )


def groups_bands_chart(*, id: str, groups: list[GroupUsage], threshold: float, label: str) -> Chart:
    """Horizontal stacked bars: GPU-hours of each group (GPU model, project) by band."""
    groups = [group for group in groups if group.usage.gpu_hours]
    if not groups:
        return chart_from_figure(id=id, figure=None, empty_message="No GPU-hours in this period.")
    labels = band_labels(threshold=threshold)
    names = [group.label for group in reversed(groups)]
    data = [
        {
            "type": "bar",
            "name": labels[band],
            "y": names,
            "x": [round(group.usage.bands.get(band, 0.0), 2) for group in reversed(groups)],
            "orientation": "h",
            "marker": {"color": BAND_COLOURS[band]},
            "hovertemplate": "%{y}: %{x:,.1f} GPU-hours "
            + labels[band].lower()
            + "<extra></extra>",
        }
        for band in BANDS
    ]
    figure = {
        "data": data,
        "layout": {
            "barmode": "stack",
            "height": 120 + 32 * len(groups),
            # No axis title: it would sit on the legend below; the section and hover say GPU-hours.
            "xaxis": {"rangemode": "tozero"},
            "yaxis": {"automargin": True},
        },
    }
    return chart_from_figure(id=id, figure=figure, label=label)


def _with_gaps(points: list, *, period: tuple, by_day: bool) -> list:
    """Every hour (or UTC day) of [start, end): the point read there, else an empty one."""
    start, end = period
    read = {point.at: point for point in points}
    if by_day:
        first, last = start.date(), (end - timedelta(days=1)).date()
        moments = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    else:
        hours = int((end - start) / timedelta(hours=1))
        moments = [start + timedelta(hours=n) for n in range(hours)]
    return [read.get(at) or UsagePoint(at, None, None, None) for at in moments]


def gpu_usage_chart(
    *, points: list, threshold: float, by_day: bool = False, period: tuple | None = None
) -> Chart:
    """One GPU by hour, or by UTC day over a long period (selectors.gpu_usage_points): mean and
    peak utilisation against the idle threshold, and memory. With `period` (its UTC start and
    end), the hours or days with no reading are gaps in the lines, not a line drawn across
    them as if the GPU had run between two runs; by day, or where fewer than half the hours
    have a reading, each reading is also a dot, so that one between two gaps shows."""
    empty = "No readings for this GPU in this period."
    if not points:
        return chart_from_figure(id="gpu-hourly", figure=None, empty_message=empty)
    read = len(points)
    if period is not None:
        points = _with_gaps(points, period=period, by_day=by_day)
    # A dot for each reading by day, or where readings are sparse (a run of two hours in a
    # month is otherwise a speck of line).
    dotted = by_day or 2 * read < len(points)
    # Hours in the organisation's zone (the request's active one): plotly draws wall-clock times.
    # Days are the UTC days the page names. The figure is the plain dict Plotly.js reads
    # (apps/spend/charts.py's reason: plotly's objects validate each point);
    # tests/gpu/test_gpu_hourly_chart.py checks that plotly reads it back unchanged.
    if by_day:
        x = [point.at.isoformat() for point in points]
        when, of = "%{x|%d %b %Y}", " (the day's hours)"
    else:
        x = [timezone.localtime(point.at).replace(tzinfo=None).isoformat() for point in points]
        when, of = "%{x|%d %b %H:00}", ""

    def line(name: str, values: list, style: dict, what: str) -> dict:
        return {
            "type": "scatter",
            "name": name,
            "x": x,
            "y": [None if value is None else round(value, 1) for value in values],
            "mode": "lines+markers" if dotted else "lines",
            "line": style,
            **({"marker": {"size": 4, "color": style["color"]}} if dotted else {}),
            "hovertemplate": f"{when}: %{{y:.1f}}% {what}{of}<extra></extra>",
        }

    data = [
        line("Mean utilisation", [p.util_mean for p in points], {"color": "#1f77b4"}, "mean"),
        line(
            "Peak utilisation",
            [p.util_max for p in points],
            {"color": "#aec7e8", "width": 1},
            "peak",
        ),
    ]
    memory = [point.memory_percent for point in points]
    if any(value is not None for value in memory):
        data.append(line("Memory used", memory, {"color": "#9467bd", "dash": "dot"}, "of memory"))
    figure = {
        "data": data,
        "layout": {
            # The idle threshold across the whole width, labelled at its left end.
            "shapes": [
                {
                    "type": "line",
                    "xref": "x domain",
                    "x0": 0,
                    "x1": 1,
                    "yref": "y",
                    "y0": threshold,
                    "y1": threshold,
                    "line": {"color": BAND_COLOURS["idle"], "dash": "dash", "width": 1},
                }
            ],
            "annotations": [
                {
                    "text": f"idle under {threshold:g}%",
                    "showarrow": False,
                    "xref": "x domain",
                    "x": 0,
                    "xanchor": "left",
                    "yref": "y",
                    "y": threshold,
                    "yanchor": "bottom",
                }
            ],
            "height": 340,
            "yaxis": {"title": {"text": "percent"}, "range": [0, 105]},
            "xaxis": {"type": "date"},
        },
    }
    return chart_from_figure(
        id="gpu-hourly",
        figure=figure,
        empty_message=empty,
        label="Utilisation by day" if by_day else "Utilisation by hour",
    )


def fleet_charts(*, fleet: Fleet) -> dict[str, Chart]:
    """The fleet page's three charts: over time, per GPU model, per project (and, for staff, the
    GPU-hours no project's registrations reach)."""
    projects = list(fleet.projects)
    if fleet.unattributed:
        projects.append(GroupUsage(label="Not attributed", usage=fleet.unattributed))
    return {
        "bands_chart": fleet_bands_chart(fleet=fleet),
        "models_chart": groups_bands_chart(
            id="fleet-models",
            groups=fleet.models,
            threshold=fleet.threshold,
            label="GPU-hours per GPU model by utilisation band",
        ),
        "projects_chart": groups_bands_chart(
            id="fleet-projects",
            groups=projects,
            threshold=fleet.threshold,
            label="GPU-hours per project by utilisation band",
        ),
    }
