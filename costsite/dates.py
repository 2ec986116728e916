"""Moments read from the bill, made safe to show.

A charge can be stored at the very ends of what a date holds (1 Jan 0001, 31 Dec 9999: the
importers refuse such dates now, older rows or a hand-made one may still hold them). Shown in a
time zone east or west of UTC, such a moment overflows Python's datetime, and the page answered
500 for everyone; a charge in the future made "bill loaded up to" read that future date.
"""

from datetime import UTC, datetime, timedelta

from django.utils import timezone

# Two days in from the first moment a datetime holds: every time zone (±26 hours at most) can
# show it.
EARLIEST_SHOWN = datetime.min.replace(tzinfo=UTC) + timedelta(days=2)


def as_of_shown(moment: datetime | None, *, now: datetime | None = None) -> datetime | None:
    """A "data as of" moment as pages show it: never later than now (a bill cannot be loaded
    up to a moment still to come), never earlier than what every time zone can show."""
    if moment is None:
        return None
    return min(max(moment, EARLIEST_SHOWN), now or timezone.now())
