"""Helpers for the GPU metrics tests."""

from datetime import UTC, datetime

from apps.gpu.models import GpuHour

ROW_FIELDS = [
    "samples",
    "util_samples",
    "util_mean",
    "util_max",
    "idle_share",
    "memory_used_mib",
    "memory_used_max_mib",
    "memory_total_mib",
    "power_watts",
    "power_max_watts",
]


def at(text: str) -> datetime:
    """`2026-07-14 10:00` as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hour_values(uuid: str, hour: str, *, mig: str = "") -> dict:
    """The rollup of one GPU-hour as plain values."""
    return (
        GpuHour.objects.filter(gpu__uuid=uuid, gpu__mig_instance=mig, hour=at(hour))
        .values(*ROW_FIELDS)
        .get()
    )


def all_hours() -> dict[tuple[str, str, str], dict]:
    """Every GPU-hour as plain values, keyed by (uuid, MIG instance, hour as 'YYYY-MM-DD HH:MM')."""
    return {
        (
            row.pop("gpu__uuid"),
            row.pop("gpu__mig_instance"),
            f"{row.pop('hour'):%Y-%m-%d %H:%M}",
        ): row
        for row in GpuHour.objects.values("gpu__uuid", "gpu__mig_instance", "hour", *ROW_FIELDS)
    }
