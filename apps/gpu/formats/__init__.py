"""GPU metric formats: one parser per format, all yielding the same columnar batches.

A parser reads a stream in bounded batches (constant memory, whatever the file's size) and yields
`MetricBatch`es: parallel numpy arrays of GPU ids and UTC timestamps (seconds since the epoch),
and per metric an array of values, NaN where the source had no value. GPUs are resolved to ids
through the `ParseContext`, so parsers never touch the database themselves.

Facts about the formats: shared/reference/gpu-metrics-formats.md.
"""

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np

# What the rollup keeps, in its own units: utilisation in percent, memory in MiB, power in watts.
# Utilisation comes in two kinds: DCGM's profiling "graphics engine active" ratio (the real one,
# and the only one MIG instances have) and the coarse "a kernel was running" percentage that
# nvidia-smi and DCGM_FI_DEV_GPU_UTIL report. The rollup prefers the first where it has it.
UTIL_ENGINE = "util_engine"
UTIL_DEVICE = "util_device"
MEMORY_USED = "memory_used"
MEMORY_FREE = "memory_free"
MEMORY_RESERVED = "memory_reserved"
MEMORY_TOTAL = "memory_total"
POWER = "power"
METRICS = (UTIL_ENGINE, UTIL_DEVICE, MEMORY_USED, MEMORY_FREE, MEMORY_RESERVED, MEMORY_TOTAL, POWER)
UTILISATION_METRICS = (UTIL_ENGINE, UTIL_DEVICE)

FORMATS = ("dcgm", "prometheus-json", "nvidia-smi")

# DCGM's "blank" sentinels (int64 0x7FFFFFFFFFFFFFF0.. and the FP64 2**47 family) leak through
# older exporters; no real GPU reading comes near either.
SENTINEL_FLOOR = 1.4e14


class GpuMetricsError(Exception):
    """Bad input: the message names the file and, where it can, the line and column.

    A NUL byte quoted from the input is shown as `\\x00`: the message is stored as text, which
    cannot hold one."""

    def __init__(self, message: str):
        super().__init__(str(message).replace("\x00", "\\x00"))


# The plausible window for a reading: from 2000-01-01 (before any GPU this reads) to a day from
# now (a clock or time zone off by hours). A reading outside it fails the import: its hour would
# be nowhere on a chart, or beyond what dates can hold.
EARLIEST_READING = datetime(2000, 1, 1, tzinfo=UTC)
READING_AHEAD = timedelta(days=1)


def reading_window() -> tuple[float, float]:
    """The window, in seconds since the epoch."""
    return EARLIEST_READING.timestamp(), (datetime.now(tz=UTC) + READING_AHEAD).timestamp()


def first_outside(ts: np.ndarray, window: tuple[float, float]) -> int | None:
    """The position of the first time outside the window (NaN included), or None."""
    low, high = window
    ts = np.asarray(ts, dtype=np.float64)
    outside = ~((ts >= low) & (ts <= high))
    return int(np.argmax(outside)) if outside.any() else None


def outside_window(seconds: float, window: tuple[float, float]) -> str:
    """What is wrong with a time outside the window, in words."""
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
        shown = f"{moment.year:04d}-{moment:%m-%d %H:%M:%S} UTC"
    except (OverflowError, OSError, ValueError):
        shown = f"{seconds!r} seconds since 1970"
    high = datetime.fromtimestamp(window[1], tz=UTC)
    return (
        f"the time {shown} is outside the plausible window for a reading (from 2000-01-01 "
        f"to {high:%Y-%m-%d %H:%M} UTC, a day from now)"
    )


@dataclass
class GpuInfo:
    """What a series or a row says about the GPU it measures."""

    uuid: str
    mig_instance: str = ""
    host: str = ""
    index: int | None = None
    model_name: str = ""
    mig_profile: str = ""
    resource_label: str = ""
    workload: str = ""


class MetricBatch(NamedTuple):
    """Readings of one or more metrics taken together: row i is GPU gpu[i] at ts[i]."""

    gpu: np.ndarray  # int64 GPU ids
    ts: np.ndarray  # float64 seconds since the epoch, UTC
    values: dict[str, np.ndarray]  # metric -> float64, NaN where missing


@dataclass
class ParseContext:
    """What a parser needs besides the bytes.

    name: how errors name the file. host: the host when the data names none. time_zone: the zone of
    nvidia-smi's naive timestamps. taken_at: when a dcgm scrape without timestamps was taken.
    gpu_id: resolves a GpuInfo to a GPU id (creating the GPU the first time).
    """

    name: str
    gpu_id: Callable[[GpuInfo], int]
    host: str = ""
    time_zone: str = "UTC"
    taken_at: datetime | None = None
    batch_rows: int = 65536
    notes: list[str] = field(default_factory=list)


def clean_values(values: np.ndarray) -> np.ndarray:
    """NaN for what is no reading at all: NaN, ±Inf and DCGM's blank sentinels."""
    values = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(values) | (np.abs(values) >= SENTINEL_FLOOR)
    if bad.any():
        values = values.copy()
        values[bad] = np.nan
    return values


def detect_format(head: bytes) -> str | None:
    """The format of a file from its first bytes, or None when it is none of ours."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{"):
        return "prometheus-json"
    first_line = text.split(b"\n", 1)[0].strip().lower()
    if first_line.startswith((b"# help", b"# type", b"dcgm_")):
        return "dcgm"
    if b"," in first_line and any(
        name in first_line for name in (b"utilization.gpu", b"memory.used", b"uuid", b"timestamp")
    ):
        return "nvidia-smi"
    return None


def _text_checked(context: ParseContext) -> ParseContext:
    """The context, its GPU resolver refusing what no database text can hold (a NUL byte, from
    binary data or a JSON escape) before it reaches the database."""
    resolve = context.gpu_id

    def gpu_id(info: GpuInfo) -> int:
        for name in (each.name for each in dataclasses.fields(GpuInfo)):
            value = getattr(info, name)
            if isinstance(value, str) and "\x00" in value:
                shown = value if len(value) <= 60 else value[:59] + "…"
                raise GpuMetricsError(
                    f"{context.name}: the GPU's {name.replace('_', ' ')} {shown!r} holds a NUL "
                    "byte (binary data, not text)."
                )
        return resolve(info)

    return dataclasses.replace(context, gpu_id=gpu_id)


def parse(fmt: str, stream, *, context: ParseContext) -> Iterator[MetricBatch]:
    """Batches of `stream` (binary) in format `fmt`."""
    from . import dcgm, nvidia_smi, prometheus

    context = _text_checked(context)

    parsers = {
        "dcgm": dcgm.parse,
        "prometheus-json": prometheus.parse,
        "nvidia-smi": nvidia_smi.parse,
    }
    return parsers[fmt](stream, context=context)
