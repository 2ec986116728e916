"""The one chart pattern: a Plotly figure built in Python from selector output, handed to the
template as a dict, written with `json_script` and drawn by `static/costsite/charts.js`.

In a template::

    {% include "includes/chart.html" with chart=spend_chart %}

where `spend_chart` is a `Chart`. A chart with no data says so instead of drawing empty axes.

A figure is either a `plotly.graph_objects.Figure` or, where a page is hot (the spend pages), the
plain dict Plotly.js reads (`{"data": [...], "layout": {...}}`) built directly: plotly's objects
copy every property several times over, which cost the overview more than its SQL.
"""

import functools
import json
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
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
    a fortnight of hourly traffic twice over, 40 ms of the deployment page. Nothing here
    changes them; no chart of the site has animation frames.
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
    for trace in figure.get("data", []):
        for key in TRACE_TEXT:
            if key in trace:
                trace[key] = _escaped(trace[key])
        _escape_layout(trace.get("legendgrouptitle"))
    _escape_layout(figure.get("layout", {}))


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
