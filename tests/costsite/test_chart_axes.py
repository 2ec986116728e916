"""The one chart pattern's axes (costsite/charts.py): whole-number axes without repeated ticks,
a day-labelled axis that ticks once a day, a run of one day drawn as one day's bar, tick labels
never clipped. Every chart goes through chart_from_figure, so every chart gets them."""

from datetime import date
from decimal import Decimal

from apps.spend.charts import pareto_chart, spend_over_time_chart
from apps.spend.selectors import Pareto, ParetoItem, SpendSeries
from costsite.charts import DAY_MS, chart_from_figure

D = Decimal


def test_an_axis_of_a_few_whole_numbers_ticks_at_each_whole_number():
    chart = chart_from_figure(
        id="runs",
        figure={
            "data": [{"type": "bar", "x": ["Jan", "Feb"], "y": [1, 2]}],
            "layout": {"yaxis": {"tickformat": ",.0f"}},
        },
    )
    assert chart.figure["layout"]["yaxis"] == {"tickformat": "d", "dtick": 1, "tick0": 0}


def test_stacked_bars_are_judged_by_their_stacked_height():
    chart = chart_from_figure(
        id="runs",
        figure={
            "data": [
                {"type": "bar", "x": ["a"], "y": [8]},
                {"type": "bar", "x": ["a"], "y": [7]},
            ],
            "layout": {"barmode": "stack"},
        },
    )
    # 15 in all: plotly's own steps (5, 10, 15) are whole already.
    assert "dtick" not in chart.figure["layout"]["yaxis"]


def test_a_money_axis_of_a_few_dollars_shows_cents_rather_than_repeated_whole_dollars():
    series = SpendSeries(
        bucket="day",
        by="workload",
        buckets=[date(2025, 3, d) for d in range(1, 4)],
        keys=["training"],
        values={"training": [D("0.40"), D("1.25"), D("2.10")]},
        totals={"training": D("3.75")},
        total=D("3.75"),
        other_currencies={},
    )
    layout = spend_over_time_chart(series=series, currency="USD").figure["layout"]
    assert layout["yaxis"]["tickformat"] == ",.2f"
    # Three days: one tick a day, each day once, and the axis says the days are UTC days.
    assert layout["xaxis"]["dtick"] == DAY_MS
    assert layout["xaxis"]["tick0"] == "2025-03-01"
    assert layout["xaxis"]["title"] == {"text": "UTC days"}
    assert layout["xaxis"]["automargin"] is True


def test_a_run_of_one_day_is_one_bar_a_day_wide_in_the_middle():
    series = SpendSeries(
        bucket="day",
        by="workload",
        buckets=[date(2025, 3, 5)],
        keys=["training"],
        values={"training": [D("120.00")]},
        totals={"training": D("120.00")},
        total=D("120.00"),
        other_currencies={},
    )
    figure = spend_over_time_chart(series=series, currency="USD").figure
    assert figure["layout"]["xaxis"]["range"] == ["2025-03-04T12:00:00", "2025-03-05T12:00:00"]
    assert figure["data"][0]["width"] == 0.8 * DAY_MS


def test_an_hourly_time_axis_takes_the_margin_its_labels_need_and_keeps_its_own_ticks():
    chart = chart_from_figure(
        id="gpu",
        figure={
            "data": [{"type": "scatter", "x": ["2025-03-01T10:00:00", "2025-03-01T11:00:00"]}],
            "layout": {"xaxis": {"type": "date"}},
        },
    )
    # One line per label (plotly's own put the year on a second, clipped line).
    assert chart.figure["layout"]["xaxis"] == {
        "type": "date",
        "automargin": True,
        "tickformat": "%-d %b %H:%M",
    }
    week = chart_from_figure(
        id="gpu",
        figure={
            "data": [{"type": "scatter", "x": ["2025-03-01T10:00:00", "2025-03-08T11:00:00"]}],
            "layout": {"xaxis": {"type": "date"}},
        },
    )
    assert week.figure["layout"]["xaxis"]["tickformat"] == "%-d %b"


def test_a_pareto_bar_hovers_with_its_whole_name_and_share():
    name = "a project with a name far too long for the axis"
    pareto = Pareto(
        noun="projects",
        items=[
            ParetoItem(
                pk=1, name=name, amount=D("75"), share=D("0.75"), cumulative_share=D("0.75")
            ),
            ParetoItem(pk=2, name="b", amount=D("25"), share=D("0.25"), cumulative_share=D("1")),
        ],
        total=D("100"),
    )
    chart = pareto_chart(pareto=pareto, currency="USD", id="p")
    bars = chart.figure["data"][0]
    assert bars["x"][0] == name
    assert chart.figure["layout"]["xaxis"]["ticktext"][0] == "a project with a …"
    assert bars["customdata"] == [75.0, 25.0]
    assert bars["hovertemplate"] == (
        "%{x}: %{y:,.2f} USD · %{customdata:.1f}% of the spend<extra></extra>"
    )


def test_stacks_keep_apart_an_x_written_as_text_and_as_a_number():
    chart = chart_from_figure(
        id="runs",
        figure={
            "data": [
                {"type": "bar", "x": ["1", 1], "y": [6, 6]},
                {"type": "bar", "x": ["1", 1.0], "y": [3, 3]},
            ],
            "layout": {"barmode": "stack"},
        },
    )
    # "1" stacks 9 high, 1 and 1.0 are two columns of 6 and 3 (JSON spells all three apart):
    # at most 9, whole numbers, so it ticks at each one (15, had two of them merged, would not).
    assert chart.figure["layout"]["yaxis"] == {"tickformat": "d", "dtick": 1, "tick0": 0}


def test_a_day_given_as_a_date_and_as_its_iso_text_stacks_in_one_column():
    chart = chart_from_figure(
        id="runs",
        figure={
            "data": [
                {"type": "bar", "x": [date(2026, 1, 5)], "y": [6]},
                {"type": "bar", "x": ["2026-01-05"], "y": [6]},
            ],
            "layout": {"barmode": "stack"},
        },
    )
    # One column of 12 (two of 6 would tick at each whole number): plotly's ticks stay.
    assert "dtick" not in chart.figure["layout"]["yaxis"]
