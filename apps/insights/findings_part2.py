"""The reasons and evidence of part 2's findings, from what a recompute stored: the idle
stretches of a notebook left running and the gaps between runs are read back from the finding's
hours (so a recompute of one period still sees the whole stretch), in one query per kind."""

import zoneinfo
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from apps.accounts.models import Organization

from .models import FindingHour, Kind

HOUR = timedelta(hours=1)
SPANS_KEPT = 50  # the latest stretches or gaps the evidence keeps


def _money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _spans(hours: list[datetime]) -> list[dict]:
    """Consecutive UTC hours as spans {start, end (exclusive), hours}."""
    spans: list[dict] = []
    for hour in hours:
        if spans and hour - spans[-1]["_end"] == HOUR:
            spans[-1]["_end"] = hour
            spans[-1]["hours"] += 1
        else:
            spans.append({"_start": hour, "_end": hour, "hours": 1})
    return [
        {
            "start": span["_start"].isoformat(),
            "end": (span["_end"] + HOUR).isoformat(),
            "hours": span["hours"],
        }
        for span in spans
    ]


def facts(*, kind: str, ids: list[int]) -> dict[int, dict]:
    """What each finding's evidence adds: a notebook's idle stretches, a resource's gaps between
    runs (each the wasted hours run together); nothing for the other kinds."""
    name = {Kind.NOTEBOOK_LEFT_RUNNING: "stretches", Kind.IDLE_BETWEEN_RUNS: "gaps"}.get(kind)
    if name is None or not ids:
        return {}
    hours: dict[int, list[datetime]] = defaultdict(list)
    for finding_id, hour in (
        FindingHour.objects.filter(finding_id__in=ids, wasted__gt=0)
        .values_list("finding_id", "hour")
        .distinct()
        .order_by("finding_id", "hour")
    ):
        hours[finding_id].append(hour)
    out = {}
    for finding_id in ids:
        spans = _spans(hours.get(finding_id, []))
        out[finding_id] = {
            name: spans[-SPANS_KEPT:],
            f"{name}_count": len(spans),
            f"{name}_hours": sum(span["hours"] for span in spans),
        }
    return out


def _local(text: str) -> datetime:
    zone = zoneinfo.ZoneInfo(Organization.get().time_zone)
    return datetime.fromisoformat(text).astimezone(zone)


def notebook_reason(*, evidence: dict, wasted: Decimal, currency: str) -> str:
    """ "GPU idle since Monday 2 Mar 09:00, 52 hours" (the latest stretch, in the organisation's
    time zone), and how many stretches in all when there are several."""
    stretches = evidence.get("stretches") or []
    if not stretches:
        return "No idle stretch left"
    latest = stretches[-1]
    since = _local(latest["start"])
    reason = f"GPU idle since {since:%A} {since.day} {since:%b %H:%M}, {latest['hours']} hours"
    if evidence.get("stretches_count", 0) > 1:
        reason += (
            f" ({evidence['stretches_count']} idle stretches, "
            f"{evidence['stretches_hours']} hours, {_money(wasted, currency)} in all)"
        )
    else:
        reason += f" ({_money(wasted, currency)})"
    return reason


def idle_between_reason(*, evidence: dict, wasted: Decimal, currency: str) -> str:
    gaps = evidence.get("gaps_count", 0)
    hours = evidence.get("gaps_hours", 0)
    return (
        f"Billed {hours} hour{'s' if hours != 1 else ''} with no registered run using it, "
        f"in {gaps} gap{'s' if gaps != 1 else ''} between runs ({_money(wasted, currency)})"
    )


def data_starved_reason(*, evidence: dict, wasted: Decimal, currency: str) -> str:
    mean = evidence.get("mean_utilisation_percent")
    target = evidence.get("target_percent")
    if mean is None:
        return "No GPU metrics while the run ran"
    return (
        f"GPUs {Decimal(mean).quantize(Decimal('0.1'))}% busy on average while the run ran, "
        f"under the {target}% target: the input pipeline is the usual cause (a GPU waiting on "
        "data is the most expensive idle resource you own)"
    )


def right_size_reason(*, evidence: dict, wasted: Decimal, currency: str) -> str:
    current = evidence["current"]
    best = evidence["candidates"][0]
    return (
        f"Peak {evidence['peak_memory_gb']} GB and {evidence['peak_utilisation_percent']}% "
        f"busy fit {best['instance_type']} ({best['gpu_count']} × {best['gpu_type']}) instead "
        f"of {current['instance_type']} ({current['gpu_count']} × {current['gpu_type']}): "
        f"{_money(Decimal(best['saving_per_month']), currency)} a month less"
    )


REASONS = {
    Kind.NOTEBOOK_LEFT_RUNNING: notebook_reason,
    Kind.IDLE_BETWEEN_RUNS: idle_between_reason,
    Kind.DATA_STARVED: data_starved_reason,
    Kind.RIGHT_SIZE: right_size_reason,
}
