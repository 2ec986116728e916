"""The one chart pattern: a Plotly figure built in Python from selector output, handed to the
template as a dict, written as a JSON script element (`Chart.json_script`: the bytes of Django's
`json_script`) and drawn by `static/costsite/charts.js`.

In a template::

    {% include "includes/chart.html" with chart=spend_chart %}

where `spend_chart` is a `Chart`. A chart with no data says so instead of drawing empty axes.

A figure is either a `plotly.graph_objects.Figure` or the plain dict Plotly.js reads
(`{"data": [...], "layout": {...}}`) built directly. The site's pages build plain dicts: plotly's
objects copy and validate every property and every point, which cost the overview more than its
SQL and the deployment page half its time. Each page's chart module has a test that plotly reads
its figure back unchanged (`_figure_json(go.Figure(figure))`), so a dict says nothing plotly
would not.
"""

import functools
import json
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import plotly.graph_objects as go
import plotly.io as pio
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from plotly.io.json import to_json_plotly

# One colour per workload, the same on every chart and in the digest (DESIGN.md).
WORKLOAD_COLOURS = {
    "training": "#1f77b4",
    "fine_tuning": "#17becf",
    "inference": "#2ca02c",
    "development": "#9467bd",
    "storage": "#ff7f0e",
    "network": "#8c564b",
    "other": "#7f7f7f",
    "unattributed": "#d62728",
}
# What every chart of the site shares, merged into each figure's layout (as update_layout does).
SITE_LAYOUT = {"margin": {"l": 50, "r": 20, "t": 30, "b": 40}, "legend": {"orientation": "h"}}
TEMPLATE = "plotly_white"


@dataclass(frozen=True)
class Chart:
    id: str
    figure: dict | None
    empty_message: str = "No data for this period."
    label: str = ""

    @property
    def is_empty(self) -> bool:
        return self.figure is None

    def json_script(self) -> SafeString:
        """The figure in a JSON script element, exactly as Django's json_script writes it (the same
        three characters escaped), by three replaces over the text instead of a translate table
        looked up per character: a year of daily bars is a few hundred kilobytes."""
        text = json.dumps(self.figure, cls=DjangoJSONEncoder)
        for character, escaped in _JSON_SCRIPT_ESCAPES:
            text = text.replace(character, escaped)
        safe = mark_safe(text)  # noqa: S308 (<, > and & escaped just above, as json_script does)
        return format_html('<script id="{}" type="application/json">{}</script>', self.id, safe)

    def drawn(self) -> "DrawnChart":
        """The chart with its script element written now: what a cache keeps (text, not the
        figure's nested lists, which cost more to pickle and to encode again)."""
        script = None if self.is_empty else str(self.json_script())
        return DrawnChart(self.id, script, self.empty_message, self.label)


@dataclass(frozen=True)
class DrawnChart:
    """A Chart already written out: includes/chart.html reads it as it reads a Chart."""

    id: str
    script: str | None
    empty_message: str = "No data for this period."
    label: str = ""

    @property
    def is_empty(self) -> bool:
        return self.script is None

    def json_script(self) -> SafeString:
        return mark_safe(self.script)  # noqa: S308 (written by Chart.json_script, escaped there)


_JSON_SCRIPT_ESCAPES = (("&", "\\u0026"), ("<", "\\u003C"), (">", "\\u003E"))


@functools.cache
def _template_json() -> str:
    """The site template as Plotly.js reads it (the layout of a figure carries it whole).
    Built once: building it from plotly's registry took about 5 ms per chart."""
    return json.dumps(pio.templates[TEMPLATE].to_plotly_json())


def _merge(into: dict, changes: dict) -> None:
    """Nested dicts are merged, other values replaced: update_layout's rule."""
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _figure_json(figure: go.Figure) -> dict:
    """A Figure as plain JSON values: plotly's own encoder turns its dates, decimals and arrays
    into JSON (json_script then escapes it for HTML).

    The figure's properties are read where plotly keeps them (`_data`, `_layout`: the dicts
    `to_dict` returns copies of) and encoded without the deep copy: `figure.to_json()` copied
    a fortnight of hourly traffic twice over, 40 ms of the deployment page when its chart was
    one. Nothing here changes them; no chart of the site has animation frames.
    """
    return json.loads(to_json_plotly({"data": figure._data, "layout": figure._layout}))


# Plotly draws text through its own pseudo-HTML (`<a href>`, `<b>`, `<br>`, `<span style>`), so
# a project or metric named `<a href="…">` became a live link inside a chart. Every string of
# these properties is data, never markup: it is escaped (Plotly turns `&lt;`, `&gt;`, `&amp;` back
# into the characters when it draws). Hover templates are code: text put into one goes through
# `plot_text`, or is referred to (`%{x}`, `%{fullData.name}`) so that it is escaped here.
TRACE_TEXT = ("name", "x", "y", "text", "hovertext", "customdata", "labels", "ids")
LAYOUT_TEXT = ("text", "title", "ticktext", "tickvals", "categoryarray")
_PLOT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def plot_text(text: str) -> str:
    """Text shown as it is in a Plotly label, hover or title, however it is spelled."""
    if "<" in text or ">" in text or "&" in text:
        return text.translate(_PLOT_ESCAPES)
    return text


def _escaped(value):
    if isinstance(value, str):
        return plot_text(value)
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    return value


def _escape_layout(layout):
    """Every title, annotation and tick label of a layout (nested: axes, legend, annotations)."""
    if isinstance(layout, list):
        for item in layout:
            _escape_layout(item)
    elif isinstance(layout, dict):
        for key, value in layout.items():
            if key in LAYOUT_TEXT and isinstance(value, (str, list)):
                layout[key] = _escaped(value)
            else:
                _escape_layout(value)


def escape_figure_text(figure: dict) -> None:
    """Escape, in place, every label and hover text of a plain figure (the site template,
    code of plotly's own, is merged in afterwards)."""
    # Traces often share one list (the x of stacked bars): it is escaped once and stays shared.
    # The original is kept with its copy, so that its id is not reused while this runs.
    escaped: dict[int, tuple] = {}
    for trace in figure.get("data", []):
        for key in TRACE_TEXT:
            if key in trace:
                value = trace[key]
                if id(value) not in escaped:
                    escaped[id(value)] = (value, _escaped(value))
                trace[key] = escaped[id(value)][1]
        _escape_layout(trace.get("legendgrouptitle"))
    _escape_layout(figure.get("layout", {}))


# -- Axes every chart gets right ------------------------------------------------------------------
# Ticks that read wrong were fixed chart by chart and came back on the next one; they are fixed
# here, once, for every figure: an axis of small whole numbers ticks at whole numbers (not
# "0, 1, 1, 2, 2" from ".0f" on 0.5 steps), a date axis whose labels are days ticks once a day
# (not one day three times), a run of one day is drawn as one day's bar in the middle, not one
# bar over the whole width, and tick labels take the margin they need (never clipped).
DAY_MS = 86_400_000
SMALL_WHOLE = 10  # up to this many units, an axis of whole numbers ticks at every one
SHORT_SPAN_DAYS = 14  # up to this many days, a day-labelled axis ticks once a day
_INTEGER_FORMATS = (".0f", ",.0f", "d", ",d", "~s")


def _axis_name(trace: dict, letter: str) -> str:
    ref = trace.get(f"{letter}axis") or letter
    return f"{letter}axis{ref[1:]}"


def _numbers(values) -> list[float]:
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _moment(value) -> datetime | None:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str) and len(value) >= 10 and value[4:5] == "-" and value[7:8] == "-":
        return _moment_text(value)
    return None


@functools.lru_cache(maxsize=8192)
def _moment_text(value: str) -> datetime | None:
    """A date or time written in ISO form (the charts' x values: the same days on every page)."""
    try:
        return datetime.fromisoformat(value.replace("Z", "")[:26]).replace(tzinfo=None)
    except ValueError:
        return None


def _stack_key(x) -> object:
    """Where a bar stacks: its x as JSON spells it, so that 1 and 1.0, and "1" and 1, stay apart,
    while a date and its ISO text meet. Text (most x values: days, names) is its own key, without
    encoding it; what JSON spells as text (a date) is that text; anything else (a number) is its
    spelling in a tuple, which no text equals."""
    if isinstance(x, str):
        return x
    spelled = json.dumps(x, default=str)
    return json.loads(spelled) if spelled.startswith('"') else (spelled,)


def _value_axes(plain: dict) -> dict[str, list[float]]:
    """Per value axis, the heights drawn on it: stacked bars add up per x."""
    layout = plain.get("layout", {})
    stacked = layout.get("barmode") in ("stack", "relative")
    heights: dict[str, list[float]] = {}
    stacks: dict[str, dict] = {}
    for trace in plain.get("data", []):
        if trace.get("orientation") == "h" or trace.get("type", "scatter") not in (
            "bar",
            "scatter",
        ):
            continue
        axis = _axis_name(trace, "y")
        ys = trace.get("y")
        if not isinstance(ys, list):
            continue
        if stacked and trace.get("type") == "bar":
            column = stacks.setdefault(axis, {})
            for x, y in zip(trace.get("x") or range(len(ys)), ys, strict=False):
                if isinstance(y, (int, float)):
                    key = _stack_key(x)
                    column[key] = column.get(key, 0.0) + float(y)
            heights.setdefault(axis, []).extend(_numbers(ys))
        else:
            heights.setdefault(axis, []).extend(_numbers(ys))
    for axis, column in stacks.items():
        heights[axis].extend(column.values())
    return heights


def _tidy_value_axes(plain: dict) -> None:
    layout = plain.setdefault("layout", {})
    for name, values in _value_axes(plain).items():
        axis = layout.setdefault(name, {})
        if not values or axis.get("type") in ("date", "category", "log"):
            continue
        if any(key in axis for key in ("dtick", "tickvals", "range")):
            continue  # a chart that chose its ticks or its range keeps them
        top = max(abs(v) for v in values)
        whole = all(v.is_integer() for v in values)
        if whole and top <= SMALL_WHOLE:
            axis.update(dtick=1, tick0=0, tickformat="d")
            if top == 0:
                axis["range"] = [0, 1]
        elif axis.get("tickformat") in _INTEGER_FORMATS and top < SMALL_WHOLE:
            # Rounded to whole units, ticks 0.5 apart read "0, 1, 1, 2, 2": show the cents.
            axis["tickformat"] = ",.2f"


def _day_labelled(axis: dict) -> bool:
    tickformat = axis.get("tickformat", "")
    if "%H" in tickformat or "%I" in tickformat:
        return False  # labels with the hour tick as often as plotly likes
    return "%d" in tickformat or "%-d" in tickformat or "%e" in tickformat


def _tidy_date_axes(plain: dict) -> None:
    layout = plain.setdefault("layout", {})
    moments: dict[str, list[datetime]] = {}
    bars: dict[str, list[dict]] = {}
    # Stacked traces share one list of x values: each list is parsed once.
    parsed_lists: dict[int, list] = {}
    for trace in plain.get("data", []):
        xs = trace.get("x")
        if not isinstance(xs, list) or not xs:
            continue
        name = _axis_name(trace, "x")
        if id(xs) not in parsed_lists:
            parsed_lists[id(xs)] = [_moment(x) for x in xs if x is not None]
        parsed = parsed_lists[id(xs)]
        if layout.get(name, {}).get("type") == "date" or (parsed and all(parsed)):
            moments.setdefault(name, []).extend(m for m in parsed if m)
            if trace.get("type") == "bar":
                bars.setdefault(name, []).append(trace)
    for name, values in moments.items():
        if not values:
            continue
        axis = layout.setdefault(name, {})
        axis.setdefault("type", "date")
        axis.setdefault("automargin", True)
        first, last = min(values), max(values)
        if "tickformat" not in axis and "tickvals" not in axis:
            # Plotly's own date labels take two lines ("Nov 25" over "2026"): the second was
            # clipped under the axis. One line: the day, and the hour where the span is short.
            axis["tickformat"] = "%-d %b" if last - first >= timedelta(days=2) else "%-d %b %H:%M"
        if any(key in axis for key in ("dtick", "tickvals")):
            continue
        whole_days = all(m.hour == m.minute == m.second == m.microsecond == 0 for m in values)
        month_buckets = whole_days and all(m.day == 1 for m in values) and not _day_labelled(axis)
        if month_buckets and len({(m.year, m.month) for m in values}) <= 12:
            axis.update(dtick="M1", tick0=first.strftime("%Y-%m-%d"))
            if "tickformat" not in axis:
                axis["tickformat"] = "%b %Y"
            width, pad = 0.8 * 28 * DAY_MS, timedelta(days=16)
        elif (last - first).days < SHORT_SPAN_DAYS and (whole_days or _day_labelled(axis)):
            axis.update(dtick=DAY_MS, tick0=first.strftime("%Y-%m-%d"))
            if "tickformat" not in axis:
                axis["tickformat"] = "%-d %b"
            width, pad = 0.8 * DAY_MS, timedelta(hours=12)
        else:
            continue
        if whole_days and "range" not in axis:
            # One bucket (a run of one day, one month) is drawn as one bar in a bucket's width.
            axis["range"] = [(first - pad).isoformat(), (last + pad).isoformat()]
            for trace in bars.get(name, []):
                trace.setdefault("width", width)


def tidy_axes(plain: dict) -> None:
    """In place: the axes rules above, for a plain figure."""
    _tidy_value_axes(plain)
    _tidy_date_axes(plain)


def chart_from_figure(
    *,
    id: str,
    figure: go.Figure | dict | None,
    empty_message: str = "No data for this period.",
    label: str = "",
) -> Chart:
    """Turn a figure into what the template needs; None (no data) stays an empty chart.

    A plain dict figure must hold JSON values only (str, float, int, bool, lists, dicts); it is
    used as it is, with the site layout merged into its layout.
    """
    if figure is None:
        return Chart(id=id, figure=None, empty_message=empty_message, label=label)
    plain = figure if isinstance(figure, dict) else _figure_json(figure)
    escape_figure_text(plain)
    tidy_axes(plain)
    layout = plain.get("layout", {})
    _merge(layout, json.loads(json.dumps(SITE_LAYOUT)))
    # A fresh copy per chart (json.loads is quicker than deepcopy): a caller may change it.
    layout["template"] = json.loads(_template_json())
    return Chart(
        id=id,
        figure={"data": plain.get("data", []), "layout": layout},
        empty_message=empty_message,
        label=label,
    )
