"""Calendar months, and which part of a range of UTC days a rollup reads as whole months.

Every rollup with a monthly table beside its daily one (the spend's `MonthlyCost`, the fleet's
`GpuMonth`) reads a long range the same way: the whole calendar months inside it from the months,
the ragged ends from the days. Shared here, below every app, so that each reads it alike.
"""

import functools
import operator
from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import Q


def month_start(day: date) -> date:
    return day.replace(day=1)


def next_month_start(day: date) -> date:
    """The first day of the month after `day`'s."""
    return (month_start(day) + timedelta(days=32)).replace(day=1)


def any_of(conditions: list[Q]) -> Q:
    return functools.reduce(operator.or_, conditions)


@dataclass(frozen=True)
class RollupPlan:
    """Which part of a range a selector reads from the monthly rollup and which from the daily.

    Whole calendar months inside the range are read as months, unless a cut (a day the selector
    compares on both sides of, such as the start of the period against the one before) falls
    inside one; the ragged ends are read as days. `months_before` stands for "every month before
    this one" (a range without a start).
    """

    months: tuple[date, ...] = ()
    months_before: date | None = None
    day_ranges: tuple[tuple[date | None, date], ...] = ()

    def days(self) -> Q | None:
        """What it reads from a daily rollup, as a filter on `day` (None: nothing)."""
        if not self.day_ranges:
            return None
        return any_of([Q(day__gte=start, day__lt=end) for start, end in self.day_ranges])

    def whole_months(self) -> Q | None:
        """What it reads from a monthly rollup, as a filter on `month` (None: nothing)."""
        wanted = [Q(month__in=self.months)] if self.months else []
        if self.months_before:
            wanted.append(Q(month__lt=self.months_before))
        return any_of(wanted) if wanted else None


def rollup_plan(start: date | None, end: date, cuts: tuple[date, ...] = ()) -> RollupPlan:
    """The plan of the UTC days [start, end) (no start: from the first day there is)."""
    months: list[date] = []
    ranges: list[tuple[date | None, date]] = []
    months_before = None
    day = start
    if start is None:
        cut_months = [month_start(cut) for cut in cuts if cut < end]
        months_before = min([month_start(end), *cut_months])
        day = months_before
    while day < end:
        month = month_start(day)
        following = next_month_start(month)
        if day == month and following <= end and not any(month < c < following for c in cuts):
            months.append(month)
            day = following
            continue
        stop = min(following, end)
        if ranges and ranges[-1][1] == day:
            ranges[-1] = (ranges[-1][0], stop)
        else:
            ranges.append((day, stop))
        day = stop
    return RollupPlan(tuple(months), months_before, tuple(ranges))
