"""The one chart pattern: a Plotly figure built in Python from selector output, handed to the
template as a dict, written with `json_script` and drawn by `static/costsite/charts.js`.

In a template::

    {% include "includes/chart.html" with chart=spend_chart %}

where `spend_chart` is a `Chart`. A chart with no data says so instead of drawing empty axes.
"""

import json
from dataclasses import dataclass

import plotly.graph_objects as go

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


@dataclass(frozen=True)
class Chart:
    id: str
    figure: dict | None
    empty_message: str = "No data for this period."
    label: str = ""

    @property
    def is_empty(self) -> bool:
        return self.figure is None


def chart_from_figure(
    *,
    id: str,
    figure: go.Figure | None,
    empty_message: str = "No data for this period.",
    label: str = "",
) -> Chart:
    """Turn a Plotly figure into what the template needs; None (no data) stays an empty chart."""
    if figure is None:
        return Chart(id=id, figure=None, empty_message=empty_message, label=label)
    figure.update_layout(
        margin={"l": 50, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h"},
        template="plotly_white",
    )
    # Plotly's own encoder turns dates, decimals and arrays into plain JSON; json_script then
    # escapes it for HTML.
    plain = json.loads(figure.to_json())
    return Chart(
        id=id,
        figure={"data": plain["data"], "layout": plain["layout"]},
        empty_message=empty_message,
        label=label,
    )
