"""The hourly GPU rollup, built from metric batches without ever counting a sample twice.

Each GPU-hour keeps, per metric, running sums and counts and the stretches of time it has already
counted ("spans", as millisecond offsets from the hour's start). A sample whose moment lies inside a
span of its GPU-hour and metric is already counted and is skipped, so importing the same window
twice, overlapping windows, a saved file after a live scrape, or a file with repeated lines all
count each sample once. Samples closer together than `GAP_MS` make one span: then two sources that
sample the same GPU at different moments (a 15 s scrape, a 60 s Prometheus step) do not both count
the same stretch of time. What that costs: a later import cannot fill a hole shorter than `GAP_MS`
in what was already counted.

Raw samples are not kept (DESIGN.md: metrics are rolled up to the hour at import); the spans are
the proof of what was counted.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .formats import (
    MEMORY_FREE,
    MEMORY_RESERVED,
    MEMORY_TOTAL,
    MEMORY_USED,
    POWER,
    UTIL_DEVICE,
    UTIL_ENGINE,
    UTILISATION_METRICS,
    MetricBatch,
)

HOUR_MS = 3_600_000
GAP_MS = 120_000
# How many GPU-hours an import holds in memory before it writes them out (and forgets them; a
# later batch that touches one again reads it back). Keeps a year-long log in constant memory.
FLUSH_AT = 20_000
GATHER_ROWS = 200_000


@dataclass(slots=True)
class MetricState:
    total: float = 0.0
    count: int = 0
    peak: float | None = None
    idle: int = 0
    spans: list[list[int]] = field(default_factory=list)
    added: int = 0  # values this import counted; not stored

    def as_json(self) -> list:
        return [self.total, self.count, self.peak, self.idle, self.spans]

    @classmethod
    def from_json(cls, value: list) -> "MetricState":
        total, count, peak, idle, spans = value
        return cls(total=total, count=count, peak=peak, idle=idle, spans=[list(s) for s in spans])


@dataclass(slots=True)
class HourRow:
    """What a GpuHour row holds, derived from the metric states."""

    gpu_id: int
    hour: int  # hours since the epoch
    samples: int
    util_samples: int
    util_mean: float | None
    util_max: float | None
    idle_share: float | None
    memory_used_mib: float | None
    memory_used_max_mib: float | None
    memory_total_mib: float | None
    power_watts: float | None
    power_max_watts: float | None
    state: dict


def _mean(state: MetricState | None) -> float | None:
    if state is None or not state.count:
        return None
    return state.total / state.count


def _merge_spans(spans: list[list[int]]) -> list[list[int]]:
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start - merged[-1][1] <= GAP_MS:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def derive(gpu_id: int, hour: int, metrics: dict[str, MetricState]) -> HourRow:
    util = metrics.get(UTIL_ENGINE)
    if util is None or not util.count:
        util = metrics.get(UTIL_DEVICE)
    has_util = util is not None and util.count > 0
    used = metrics.get(MEMORY_USED)
    total = metrics.get(MEMORY_TOTAL)
    memory_total = _mean(total)
    if memory_total is None and _mean(used) is not None and _mean(metrics.get(MEMORY_FREE)):
        # Total = used + free (+ reserved): the same sum of means as the mean of sums, when the
        # metrics were sampled together.
        memory_total = (
            _mean(used)
            + _mean(metrics.get(MEMORY_FREE))
            + (_mean(metrics.get(MEMORY_RESERVED)) or 0)
        )
    power = metrics.get(POWER)
    return HourRow(
        gpu_id=gpu_id,
        hour=hour,
        samples=max((state.count for state in metrics.values()), default=0),
        util_samples=util.count if has_util else 0,
        util_mean=_mean(util) if has_util else None,
        util_max=util.peak if has_util else None,
        idle_share=(util.idle / util.count) if has_util else None,
        memory_used_mib=_mean(used),
        memory_used_max_mib=used.peak if used is not None and used.count else None,
        memory_total_mib=memory_total,
        power_watts=_mean(power),
        power_max_watts=power.peak if power is not None and power.count else None,
        state={name: state.as_json() for name, state in metrics.items() if state.count},
    )


class RollupBuilder:
    """Folds metric batches into GPU-hours.

    load(keys) returns the stored state of those (gpu_id, hour) keys that exist; write(rows) stores
    derived rows. Both run inside the caller's transaction.
    """

    def __init__(
        self,
        *,
        idle_threshold: float,
        load: Callable[[set[tuple[int, int]]], dict[tuple[int, int], dict]],
        write: Callable[[list[HourRow]], None],
        physical: Callable[[int], int] = lambda gpu_id: gpu_id,
        flush_at: int = FLUSH_AT,
    ):
        self.idle_threshold = idle_threshold
        self.load = load
        self.write = write
        self.physical = physical
        self.flush_at = flush_at
        self.hours: dict[tuple[int, int], dict[str, MetricState]] = {}
        self.touched: set[tuple[int, int]] = set()
        self.samples = 0
        self._physical_hours: list[np.ndarray] = []
        self._pending: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._pending_rows = 0

    def add(self, batch: MetricBatch) -> None:
        """Fold a batch in. Small batches (a Prometheus series is one GPU, one metric) are
        gathered first: sorting and looking up GPU-hours costs the same for 5,000 rows as for
        200,000, so it is done once for many."""
        gpu, ts, values = batch
        if len(ts) == 0:
            return
        if len(ts) >= GATHER_ROWS:
            self._process_pending()
            self._process(gpu, ts, values)
        else:
            for metric, value in values.items():
                self._pending.setdefault(metric, []).append((gpu, ts, value))
            self._pending_rows += len(ts) * len(values)
            if self._pending_rows >= GATHER_ROWS:
                self._process_pending()
        if len(self.hours) >= self.flush_at:
            self.flush()

    def _process_pending(self) -> None:
        pending, self._pending, self._pending_rows = self._pending, {}, 0
        for metric, parts in pending.items():
            self._process(
                np.concatenate([part[0] for part in parts]),
                np.concatenate([part[1] for part in parts]),
                {metric: np.concatenate([part[2] for part in parts])},
            )

    def _process(self, gpu: np.ndarray, ts: np.ndarray, values: dict[str, np.ndarray]) -> None:
        ms = np.rint(ts * 1000.0).astype(np.int64)
        # Most input comes sorted (a log in time order, series one GPU after another): then the
        # sort, the costliest step here, is not needed.
        same_gpu = gpu[1:] == gpu[:-1]
        in_order = ((gpu[1:] > gpu[:-1]) | (same_gpu & (ms[1:] >= ms[:-1]))).all()
        order = None if in_order else np.lexsort((ms, gpu))
        if order is not None:
            gpu, ms = gpu[order], ms[order]
        hour = ms // HOUR_MS
        for metric, value in values.items():
            if order is not None:
                value = value[order]
            present = ~np.isnan(value)
            if present.all():
                self._add_metric(metric, gpu, ms, hour, value)
            elif present.any():
                self._add_metric(metric, gpu[present], ms[present], hour[present], value[present])

    def _add_metric(
        self, metric: str, gpu: np.ndarray, ms: np.ndarray, hour: np.ndarray, value: np.ndarray
    ) -> None:
        """Fold one metric's readings, sorted by GPU and time, into the GPU-hours."""
        # The same GPU at the same moment twice in one batch: the first one counts.
        repeated = (gpu[1:] == gpu[:-1]) & (ms[1:] == ms[:-1])
        if repeated.any():
            keep = np.concatenate(([True], ~repeated))
            gpu, ms, hour, value = gpu[keep], ms[keep], hour[keep], value[keep]

        starts = self._group_starts(gpu, hour)
        keys = list(zip(gpu[starts].tolist(), hour[starts].tolist(), strict=True))
        self._ensure_loaded(keys)

        # Drop what the stored spans say is counted already.
        counted = None
        ends = np.append(starts[1:], len(ms))
        for number, key in enumerate(keys):
            state = self.hours[key].get(metric)
            if state is None or not state.spans:
                continue
            offsets = ms[starts[number] : ends[number]] - key[1] * HOUR_MS
            inside = np.zeros(len(offsets), dtype=bool)
            for start, end in state.spans:
                inside |= (offsets >= start) & (offsets <= end)
            if inside.any():
                if counted is None:
                    counted = np.zeros(len(ms), dtype=bool)
                counted[starts[number] : ends[number]] = inside
        if counted is not None:
            keep = ~counted
            gpu, ms, hour, value = gpu[keep], ms[keep], hour[keep], value[keep]
            if len(ms) == 0:
                return
            starts = self._group_starts(gpu, hour)
            keys = list(zip(gpu[starts].tolist(), hour[starts].tolist(), strict=True))

        counts = np.diff(np.append(starts, len(ms))).tolist()
        totals = np.add.reduceat(value, starts).tolist()
        peaks = np.maximum.reduceat(value, starts).tolist()
        if metric in UTILISATION_METRICS:
            idles = np.add.reduceat((value < self.idle_threshold).astype(np.int64), starts).tolist()
        else:
            idles = [0] * len(starts)
        # Stretches without a gap over GAP_MS, as offsets into their hour.
        gap = np.zeros(len(ms), dtype=bool)
        gap[starts] = True
        gap[1:] |= (ms[1:] - ms[:-1]) > GAP_MS
        run_starts = np.flatnonzero(gap)
        run_ends = np.append(run_starts[1:], len(ms)) - 1
        run_group = (np.searchsorted(starts, run_starts, side="right") - 1).tolist()
        offsets = ms - hour * HOUR_MS
        run_first = offsets[run_starts].tolist()
        run_last = offsets[run_ends].tolist()

        runs_by_group: dict[int, list[list[int]]] = {}
        for group, first, last in zip(run_group, run_first, run_last, strict=True):
            runs_by_group.setdefault(group, []).append([first, last])
        for number, key in enumerate(keys):
            metrics = self.hours[key]
            state = metrics.get(metric)
            if state is None:
                state = metrics[metric] = MetricState()
            state.total += totals[number]
            state.count += counts[number]
            state.peak = peaks[number] if state.peak is None else max(state.peak, peaks[number])
            state.idle += idles[number]
            state.added += counts[number]
            runs = runs_by_group[number]
            if state.spans or len(runs) > 1:
                state.spans = _merge_spans(state.spans + runs)
            else:
                state.spans = runs
            self.touched.add(key)

    @staticmethod
    def _group_starts(gpu: np.ndarray, hour: np.ndarray) -> np.ndarray:
        boundary = np.ones(len(gpu), dtype=bool)
        boundary[1:] = (gpu[1:] != gpu[:-1]) | (hour[1:] != hour[:-1])
        return np.flatnonzero(boundary)

    def _ensure_loaded(self, keys: Iterable[tuple[int, int]]) -> None:
        missing = {key for key in keys if key not in self.hours}
        if not missing:
            return
        stored = self.load(missing)
        for key in missing:
            metrics = {
                name: MetricState.from_json(value) for name, value in stored.get(key, {}).items()
            }
            self.hours[key] = metrics

    def flush(self) -> None:
        """Write every GPU-hour this import changed, and forget them all."""
        self._process_pending()
        rows = []
        for key in self.touched:
            metrics = self.hours[key]
            # A sample is one GPU at one moment, whatever metrics it carried: a GPU-hour gained
            # as many as its metric that gained most. (Exact while one import holds its GPU-hours
            # in memory; one that outgrows FLUSH_AT and meets an hour again after writing it may
            # count that hour's samples twice here, never in the rollup.)
            self.samples += max(state.added for state in metrics.values())
            rows.append(derive(key[0], key[1], metrics))
        if rows:
            self.write(rows)
            self._physical_hours.append(
                np.array([(self.physical(gpu) << 32) | hour for gpu, hour in self.touched])
            )
        self.hours.clear()
        self.touched = set()

    def physical_hours(self) -> np.ndarray:
        """Distinct (physical GPU, hour) pairs this import changed, packed as gpu << 32 | hour."""
        if not self._physical_hours:
            return np.array([], dtype=np.int64)
        return np.unique(np.concatenate(self._physical_hours))
