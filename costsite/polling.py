"""What the polled sources share (a cloud's billing exports, a GPU metrics endpoint): their
health, their back-off after failures and their dispatch, written once.

Each app's source model inherits `PolledSource` and names its interval field; beat's tick of
each app claims the sources due with `polled_sources_claim_due`, and a poll records how it went
with `polled_source_failed` or `polled_source_succeeded`. The retry delays stay each app's own
(a bill comes a few times a day, a metrics endpoint every 30 seconds).

Also the one rule of a tracked run (an import, a re-attribution): a running run whose process
showed no sign of life for `STALE_AFTER` was killed, and may be claimed again.
"""

from datetime import datetime, timedelta

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

# A running run whose process showed no sign of life for this long was killed; it may be
# claimed again (progress beats at least every few seconds while a run works).
STALE_AFTER = timedelta(minutes=10)


class PolledSource(models.Model):
    """A source polled on a schedule: its health, its failures and when it is due next.

    `next_poll_at` is claimed by the dispatcher with a conditional UPDATE, so two beat ticks
    never poll a source twice."""

    # The subclass's field holding its interval, and that field's unit in seconds.
    INTERVAL_FIELD = ""
    INTERVAL_UNIT_SECONDS = 1

    class Health(models.TextChoices):
        UNKNOWN = "unknown", "Not polled yet"
        HEALTHY = "healthy", "Healthy"
        UNHEALTHY = "unhealthy", "Unhealthy"

    is_paused = models.BooleanField(default=False)

    health = models.CharField(max_length=20, choices=Health.choices, default=Health.UNKNOWN)
    last_error = models.TextField(blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    next_poll_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @property
    def poll_interval(self) -> timedelta:
        return timedelta(seconds=getattr(self, self.INTERVAL_FIELD) * self.INTERVAL_UNIT_SECONDS)


def polled_sources_claim_due(
    *, model: type[PolledSource], now: datetime | None = None
) -> list[int]:
    """Ids of the sources due for a poll, each claimed by moving its next poll on (a conditional
    UPDATE, so that two dispatchers never claim a source twice)."""
    now = now or timezone.now()
    claimed = []
    due = model.objects.filter(is_paused=False).filter(
        Q(next_poll_at__isnull=True) | Q(next_poll_at__lte=now)
    )
    for source_id, next_poll_at, interval in due.values_list(
        "pk", "next_poll_at", model.INTERVAL_FIELD
    ):
        updated = model.objects.filter(pk=source_id, next_poll_at=next_poll_at).update(
            next_poll_at=now + timedelta(seconds=interval * model.INTERVAL_UNIT_SECONDS)
        )
        if updated:
            claimed.append(source_id)
    return claimed


def polled_source_failed(
    *, source: PolledSource, error: str, now: datetime, retry_seconds: int
) -> None:
    """Mark the source unhealthy with the error; its next scheduled poll waits the task's retry
    delay and an interval past it, so the retry and the schedule never poll a down source at
    once."""
    type(source).objects.filter(pk=source.pk).update(
        health=PolledSource.Health.UNHEALTHY,
        last_error=error,
        last_failure_at=now,
        consecutive_failures=F("consecutive_failures") + 1,
        next_poll_at=now + timedelta(seconds=retry_seconds) + source.poll_interval,
        updated_at=now,
    )
    source.refresh_from_db()


def polled_source_succeeded(
    *, source: PolledSource, now: datetime, reschedule: bool = True, **values
) -> None:
    """Mark the source healthy; the next poll is an interval from now unless `reschedule` is
    False (an extra poll, such as a re-run, does not move the schedule). `values`: the
    subclass's own fields to set too."""
    values |= {
        "health": PolledSource.Health.HEALTHY,
        "last_error": "",
        "last_success_at": now,
        "consecutive_failures": 0,
        "updated_at": now,
    }
    if reschedule:
        values["next_poll_at"] = now + source.poll_interval
    type(source).objects.filter(pk=source.pk).update(**values)
    source.refresh_from_db()
