"""The date range and filters every spend page takes from its URL (?preset=30d&team=vision...).

The state lives in the query string, so a filtered page can be bookmarked, shared and reloaded, and
htmx pushes the same URL it fetched. Days are UTC days, as the rollups' are; a range is shown with
its last day included and kept internally as [start, end).
"""

import calendar
from dataclasses import dataclass
from datetime import date, timedelta
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import ValidationError

from apps.accounts.models import Team
from apps.projects.models import Project, Workload
from costsite.forms import SiteForm
from costsite.months import month_start

# (key, label). "all" starts at the first day with data.
PRESETS = [
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
    ("90d", "Last 90 days"),
    ("mtd", "This month"),
    ("last-month", "Last month"),
    ("ytd", "This year"),
    ("12m", "Last 12 months"),
    ("all", "All time"),
]
PRESET_LABELS = dict(PRESETS)
# A custom range longer than this would make a page add up years of rollups for one view.
MAX_CUSTOM_DAYS = 731
# Longer ranges are drawn by month: a year of daily bars is unreadable.
DAILY_UNTIL_DAYS = 92
# The days a custom range may name: no cloud bill is older, and a range at the edges of what a
# date can hold (1 Jan 0001, 31 Dec 9999) has no period before it or day after it to compute.
EARLIEST_DAY = date(2000, 1, 1)
LATEST_DAY = date(2099, 12, 31)


def previous_month_start(day: date) -> date:
    return month_start(month_start(day) - timedelta(days=1))


def days_in_month(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


@dataclass(frozen=True)
class Period:
    """Days [start, end). `start` None: from the first day with data ("all time")."""

    start: date | None
    end: date
    preset: str = ""

    @property
    def last_day(self) -> date:
        return self.end - timedelta(days=1)

    @property
    def days(self) -> int | None:
        return None if self.start is None else (self.end - self.start).days

    @property
    def previous(self) -> "Period | None":
        """The period of the same length just before: what "top movers" compare against."""
        if self.start is None:
            return None
        return Period(start=self.start - timedelta(days=self.days), end=self.start)

    @property
    def label(self) -> str:
        if self.preset:
            return PRESET_LABELS[self.preset]
        return f"{self.start:%-d %b %Y} – {self.last_day:%-d %b %Y}"

    def bucket(self, first_day: date | None = None) -> str:
        """ "day" or "month": how a chart of this period groups its days."""
        start = self.start or first_day
        if start is None or (self.end - start).days <= DAILY_UNTIL_DAYS:
            return "day"
        return "month"


def preset_period(preset: str, *, today: date) -> Period:
    tomorrow = today + timedelta(days=1)
    if preset == "7d":
        return Period(today - timedelta(days=6), tomorrow, preset)
    if preset == "30d":
        return Period(today - timedelta(days=29), tomorrow, preset)
    if preset == "90d":
        return Period(today - timedelta(days=89), tomorrow, preset)
    if preset == "mtd":
        return Period(month_start(today), tomorrow, preset)
    if preset == "last-month":
        return Period(previous_month_start(today), month_start(today), preset)
    if preset == "ytd":
        return Period(date(today.year, 1, 1), tomorrow, preset)
    if preset == "12m":
        # Twelve whole calendar months, this one included: twelve bars on a monthly chart.
        start = month_start(today)
        for _ in range(11):
            start = previous_month_start(start)
        return Period(start, tomorrow, preset)
    if preset == "all":
        return Period(None, tomorrow, preset)
    raise ValueError(f"unknown preset {preset!r}")


class _OneQueryChoices(forms.models.ModelChoiceIterator):
    """The choices read by one plain query. Django's iterator reads them through
    `QuerySet.iterator()`, which on PostgreSQL is a server-side cursor (DECLARE, FETCH and
    CLOSE: three round trips) for the few dozen teams or projects of a filter bar."""

    def __iter__(self):
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        for choice in self.queryset.all():
            yield self.choice(choice)


class _ChoiceField(forms.ModelChoiceField):
    iterator = _OneQueryChoices


class SpendFilterForm(SiteForm):
    """The range (a preset, or a custom start and end) and the filters of one page.

    `dimensions` names the filters the page offers (the overview offers all four; a project page
    has no team or project filter). Teams and projects are limited to those the user may see, so
    a slug of another team's is an invalid choice, not a way to peek.
    """

    FILTERS = ("team", "project", "provider", "workload")

    preset = forms.ChoiceField(
        choices=[("", "Custom"), *PRESETS],
        required=False,
        error_messages={"invalid_choice": "Choose one of the date ranges offered."},
    )
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(
        required=False,
        label="to (included)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    team = _ChoiceField(
        queryset=Team.objects.none(),
        to_field_name="slug",
        required=False,
        empty_label="All teams",
        error_messages={"invalid_choice": "Choose one of your teams."},
    )
    project = _ChoiceField(
        queryset=Project.objects.none(),
        to_field_name="slug",
        required=False,
        empty_label="All projects",
        error_messages={"invalid_choice": "Choose one of the projects you can see."},
    )
    provider = forms.ChoiceField(
        required=False,
        error_messages={"invalid_choice": "Choose one of the providers in the bill."},
    )
    workload = forms.ChoiceField(
        choices=[("", "All workloads"), *Workload.choices],
        required=False,
        error_messages={"invalid_choice": "Choose one of the workloads."},
    )

    def __init__(
        self,
        data,
        *,
        today: date,
        default_preset: str = "30d",
        dimensions: tuple[str, ...] = FILTERS,
        teams=None,
        projects=None,
        providers: list[str] = (),
        workloads: list[tuple[str, str]] | None = None,
    ):
        # Only the keys this form knows: a page's own parameters (?page=2) are not filters.
        known = {"preset", "start", "end", *dimensions}
        super().__init__({key: value for key, value in data.items() if key in known})
        self.today = today
        self.default_preset = default_preset
        self.dimensions = dimensions
        for name in self.FILTERS:
            if name not in dimensions:
                del self.fields[name]
        if "team" in self.fields:
            self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
        if "project" in self.fields:
            self.fields["project"].queryset = (
                projects if projects is not None else Project.objects.none()
            )
        if "provider" in self.fields:
            self.fields["provider"].choices = [("", "All providers")] + [
                (name, name) for name in providers
            ]
        if "workload" in self.fields and workloads is not None:
            self.fields["workload"].choices = [("", "All workloads"), *workloads]

    def clean(self) -> dict:
        cleaned = super().clean()
        start, end = cleaned.get("start"), cleaned.get("end")
        for name, day in (("start", start), ("end", end)):
            if day and not EARLIEST_DAY <= day <= LATEST_DAY:
                self.add_error(
                    name,
                    f"Choose a date between {EARLIEST_DAY:%-d %b %Y} and {LATEST_DAY:%-d %b %Y}.",
                )
        if "start" in self.errors or "end" in self.errors:
            return cleaned
        if start or end:
            if not (start and end):
                raise ValidationError(
                    "Give both a start and an end date for a custom range, or choose a preset."
                )
            if start > end:
                raise ValidationError("The start date must be on or before the end date.")
            if (end - start).days + 1 > MAX_CUSTOM_DAYS:
                raise ValidationError(
                    f"Choose a range of at most {MAX_CUSTOM_DAYS} days (two years); this one "
                    f"has {(end - start).days + 1}."
                )
        team, project = cleaned.get("team"), cleaned.get("project")
        if team and project and project.team_id != team.pk:
            self.add_error(
                "project", f"The project “{project.name}” is not in the team “{team.name}”."
            )
        return cleaned


@dataclass(frozen=True)
class FilterSelect:
    """One filter's <select>, ready to write: Django's widget templates render each option
    through an include of its own, a tenth of a spend page's server time for the filter bar's
    sixty options; this is what they would write, built in Python."""

    label: str
    name: str
    attrs: list[tuple[str, str | None]]  # after name; None: an attribute without a value
    options: list[tuple[str, str, bool]]  # value, label, selected


def _filter_select(field: forms.BoundField) -> FilterSelect:
    widget = field.field.widget
    # The attributes and the selected value as BoundField.as_widget and Select would make them.
    attrs = {**widget.attrs, **field.build_widget_attrs({}, widget)}
    if field.auto_id and "id" not in widget.attrs:
        attrs.setdefault("id", field.auto_id)
    chosen = set(widget.format_value(field.value()))
    options, selected_one = [], False
    for value, label in field.field.choices:
        value = "" if value is None else str(value)
        selected = not selected_one and value in chosen
        selected_one = selected_one or selected
        options.append((value, str(label), selected))
    return FilterSelect(
        label=str(field.label),
        name=field.html_name,
        attrs=[
            (key, None if value is True else str(value))
            for key, value in attrs.items()
            if value is not False and value is not None
        ],
        options=options,
    )


@dataclass(frozen=True)
class SpendFilters:
    """What a page shows: the period and the filters that held (an invalid one is dropped and
    its error shown), plus the query string that reproduces them."""

    period: Period
    team: Team | None = None
    project: Project | None = None
    provider: str = ""
    workload: str = ""
    form: SpendFilterForm | None = None
    default_preset: str = "30d"

    @property
    def params(self) -> dict[str, str]:
        """The URL parameters of this state; the default range is left out."""
        out: dict[str, str] = {}
        if self.period.preset:
            if self.period.preset != self.default_preset:
                out["preset"] = self.period.preset
        else:
            out["start"] = self.period.start.isoformat()
            out["end"] = self.period.last_day.isoformat()
        if self.team:
            out["team"] = self.team.slug
        if self.project:
            out["project"] = self.project.slug
        if self.provider:
            out["provider"] = self.provider
        if self.workload:
            out["workload"] = self.workload
        return out

    def query(self, **changes: str) -> str:
        """The query string with some parameters changed ("" removes one)."""
        params = self.params
        if "preset" in changes:
            params.pop("start", None)
            params.pop("end", None)
        for key, value in changes.items():
            if value == "" or (key == "preset" and value == self.default_preset):
                params.pop(key, None)
            else:
                params[key] = value
        return urlencode(params)

    @property
    def start_value(self) -> str:
        """The date inputs show the range in force ("all time" has no start to show)."""
        return self.period.start.isoformat() if self.period.start else ""

    @property
    def end_value(self) -> str:
        return self.period.last_day.isoformat() if self.period.start else ""

    @property
    def selects(self) -> list[FilterSelect]:
        """The filter fields this page offers, for the filter bar."""
        if self.form is None:
            return []
        return [
            _filter_select(self.form[name])
            for name in self.form.dimensions
            if name in self.form.fields
        ]

    @property
    def range_errors(self) -> list[str]:
        """Why the range asked for was refused (a page shows them beside the default range; an
        export answers 400 with them rather than a file of another range than the one asked)."""
        if self.form is None:
            return []
        names = ("preset", "start", "end", "__all__")
        return [str(e) for name in names for e in self.form.errors.get(name, [])]

    @property
    def query_string(self) -> str:
        return urlencode(self.params)

    def presets(self) -> list[dict]:
        return [
            {
                "key": key,
                "label": label,
                "query": self.query(preset=key),
                "active": key == self.period.preset,
            }
            for key, label in PRESETS
        ]


def spend_filters_from(
    data,
    *,
    today: date,
    default_preset: str = "30d",
    dimensions: tuple[str, ...] = SpendFilterForm.FILTERS,
    teams=None,
    projects=None,
    providers: list[str] = (),
    workloads: list[tuple[str, str]] | None = None,
) -> SpendFilters:
    """The filters of a request's GET data; what is invalid falls back to the default."""
    form = SpendFilterForm(
        data,
        today=today,
        default_preset=default_preset,
        dimensions=dimensions,
        teams=teams,
        projects=projects,
        providers=providers,
        workloads=workloads,
    )
    form.is_valid()
    cleaned = form.cleaned_data
    preset = cleaned.get("preset") or ""
    start, end = cleaned.get("start"), cleaned.get("end")
    range_ok = not ({"preset", "start", "end"} & set(form.errors)) and not form.non_field_errors()
    custom = range_ok and start and end
    if custom and preset:
        # The date inputs always show the range in force: sent back unchanged beside a preset
        # (a filter changed), they keep the preset; edited, they make a custom range.
        shown = preset_period(preset, today=today)
        custom = (start, end + timedelta(days=1)) != (shown.start, shown.end)
    if custom:
        period = Period(start, end + timedelta(days=1))
    else:
        period = preset_period(preset if range_ok and preset else default_preset, today=today)
    return SpendFilters(
        period=period,
        team=cleaned.get("team"),
        project=cleaned.get("project") if "project" not in form.errors else None,
        provider=cleaned.get("provider") or "",
        workload=cleaned.get("workload") or "",
        form=form,
        default_preset=default_preset,
    )
