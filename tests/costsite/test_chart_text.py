"""Chart labels are text: a name spelled like Plotly's markup is shown as it is, never drawn as a
link or styled text (costsite/charts.py escapes every label and hover text, for every chart)."""

import json
from datetime import date
from decimal import Decimal

import plotly.graph_objects as go

from apps.experiments.charts import metrics_chart
from apps.experiments.selectors import MetricSeries
from apps.spend.charts import pareto_chart, spend_over_time_chart
from apps.spend.selectors import Pareto, ParetoItem, SpendSeries
from costsite.charts import chart_from_figure, plot_text

LINK = '<a href="https://evil.example/">free GPUs</a>'
ESCAPED = '&lt;a href="https://evil.example/"&gt;free GPUs&lt;/a&gt;'


def markup_in(chart) -> list[str]:
    """Every `<…>` in the figure that is not the hover templates' own `<extra>`."""
    text = json.dumps(chart.figure["data"]) + json.dumps(
        {key: value for key, value in chart.figure["layout"].items() if key != "template"}
    )
    return [
        tag for tag in text.replace("<extra>", "").replace("</extra>", "").split("<")[1:] if tag
    ]


def test_plot_text_escapes_plotlys_markup_and_leaves_plain_text_alone():
    assert plot_text(LINK) == ESCAPED
    assert plot_text("R&D <b>bold</b> <br> <span style='x'>") == (
        "R&amp;D &lt;b&gt;bold&lt;/b&gt; &lt;br&gt; &lt;span style='x'&gt;"
    )
    assert plot_text("Image ranking") == "Image ranking"


def test_every_label_of_a_plain_figure_is_escaped():
    chart = chart_from_figure(
        id="x",
        figure={
            "data": [
                {
                    "type": "bar",
                    "name": LINK,
                    "x": [LINK, "plain"],
                    "y": [1.0, 2.0],
                    "text": [LINK, None],
                    "hovertext": LINK,
                    "customdata": [[LINK, 1]],
                    "hovertemplate": "%{x}: %{y}<extra></extra>",
                }
            ],
            "layout": {
                "title": {"text": LINK},
                "xaxis": {"tickvals": [LINK], "ticktext": [LINK], "title": LINK},
                "annotations": [{"text": LINK}],
            },
        },
    )
    trace = chart.figure["data"][0]
    assert trace["name"] == ESCAPED
    assert trace["x"] == [ESCAPED, "plain"]
    assert trace["y"] == [1.0, 2.0]
    assert trace["text"] == [ESCAPED, None]
    assert trace["hovertext"] == ESCAPED
    assert trace["customdata"] == [[ESCAPED, 1]]
    assert trace["hovertemplate"] == "%{x}: %{y}<extra></extra>"
    layout = chart.figure["layout"]
    assert layout["title"] == {"text": ESCAPED}
    assert layout["xaxis"] == {"tickvals": [ESCAPED], "ticktext": [ESCAPED], "title": ESCAPED}
    assert layout["annotations"] == [{"text": ESCAPED}]
    assert markup_in(chart) == []


def test_a_plotly_figure_is_escaped_the_same_way():
    figure = go.Figure()
    figure.add_bar(name=LINK, y=[LINK], x=[3], orientation="h", hovertemplate="%{y}<extra></extra>")
    chart = chart_from_figure(id="x", figure=figure)
    assert (chart.figure["data"][0]["name"], chart.figure["data"][0]["y"]) == (ESCAPED, [ESCAPED])
    assert markup_in(chart) == []


def test_a_project_named_like_a_link_is_text_in_the_pareto_chart():
    item = ParetoItem(
        pk=1,
        name=LINK,
        amount=Decimal("10.00"),
        share=Decimal("1"),
        cumulative_share=Decimal("1"),
    )
    chart = pareto_chart(
        pareto=Pareto(noun="projects", items=[item], total=Decimal("10.00")),
        currency="<b>USD</b>",
        id="project-pareto",
    )
    bars = chart.figure["data"][0]
    assert bars["x"] == [ESCAPED]
    assert chart.figure["layout"]["xaxis"]["tickvals"] == [ESCAPED]
    assert chart.figure["layout"]["xaxis"]["ticktext"][0] == '&lt;a href="https://…'
    assert bars["hovertemplate"] == (
        "%{x}: %{y:,.2f} &lt;b&gt;USD&lt;/b&gt; · %{customdata:.1f}% of the spend<extra></extra>"
    )
    assert markup_in(chart) == []


def test_a_series_key_or_metric_named_like_markup_is_not_written_into_a_hover_template():
    series = SpendSeries(
        by="workload",
        bucket="day",
        buckets=[date(2025, 3, 1)],
        keys=[LINK],
        values={LINK: [Decimal("1.00")]},
        totals={LINK: Decimal("1.00")},
        total=Decimal("1.00"),
    )
    chart = spend_over_time_chart(series=series, currency="USD")
    trace = chart.figure["data"][0]
    assert trace["name"] == ESCAPED
    assert trace["hovertemplate"] == "%{x|%d %b %Y}: %{y:,.2f} USD<extra>%{fullData.name}</extra>"
    assert markup_in(chart) == []
    chart = metrics_chart(series=[MetricSeries(name=LINK, steps=[1, 2], values=[0.5, 0.4])])
    trace = chart.figure["data"][0]
    assert trace["name"] == ESCAPED
    assert trace["hovertemplate"] == "step %{x}: %{y}<extra>%{fullData.name}</extra>"
    assert markup_in(chart) == []


def test_traces_sharing_one_list_are_escaped_alike_and_once():
    shared = [LINK, "plain"]
    chart = chart_from_figure(
        id="x",
        figure={
            "data": [
                {"type": "bar", "name": "a", "x": shared, "y": [1.0, 2.0]},
                {"type": "bar", "name": "b", "x": shared, "y": [3.0, 4.0]},
                {"type": "bar", "name": "c", "x": [LINK, "plain"], "y": [5.0, 6.0]},
            ],
            "layout": {"barmode": "stack"},
        },
    )
    first, second, third = chart.figure["data"]
    assert first["x"] == second["x"] == third["x"] == [ESCAPED, "plain"]
    assert first["x"] is second["x"]  # escaped once, still one list
    assert shared == [LINK, "plain"]  # the caller's list is left as it was


def test_the_script_element_is_djangos_json_script_byte_for_byte():
    from django.utils.html import json_script

    chart = chart_from_figure(
        id="spend-1",
        figure={
            "data": [{"type": "bar", "name": "</script><b>&", "x": ["a"], "y": [1.0]}],
            "layout": {"title": {"text": "R&D < 1 \u2028"}},
        },
    )
    script = chart.json_script()
    assert str(script) == json_script(chart.figure, "spend-1")
    assert "</script><b>" not in script.removesuffix("</script>")
