"""dcgm-exporter's /metrics text (Prometheus exposition format 0.0.4), scraped or saved to a file.

Parsed with prometheus-client's parser, never by hand: label values can hold spaces, commas and
quotes. A scrape carries no timestamps: every sample is taken at `context.taken_at` unless the
line has a timestamp of its own (a federated or re-exported scrape).
"""

import io
import re
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
from prometheus_client.parser import text_fd_to_metric_families

from . import (
    MEMORY_FREE,
    MEMORY_RESERVED,
    MEMORY_TOTAL,
    MEMORY_USED,
    POWER,
    UTIL_DEVICE,
    UTIL_ENGINE,
    GpuInfo,
    GpuMetricsError,
    MetricBatch,
    ParseContext,
    clean_values,
    outside_window,
    reading_window,
)

# Series name -> (metric, factor to the rollup's unit). Lower-case names are the 1.x exporter's
# (--use-old-namespace).
DCGM_METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (UTIL_ENGINE, 100.0),  # a ratio 0-1
    "dcgm_fi_prof_gr_engine_active": (UTIL_ENGINE, 100.0),
    "DCGM_FI_DEV_GPU_UTIL": (UTIL_DEVICE, 1.0),
    "dcgm_gpu_utilization": (UTIL_DEVICE, 1.0),
    "DCGM_FI_DEV_FB_USED": (MEMORY_USED, 1.0),
    "dcgm_fb_used": (MEMORY_USED, 1.0),
    "DCGM_FI_DEV_FB_FREE": (MEMORY_FREE, 1.0),
    "dcgm_fb_free": (MEMORY_FREE, 1.0),
    "DCGM_FI_DEV_FB_RESERVED": (MEMORY_RESERVED, 1.0),
    "DCGM_FI_DEV_FB_TOTAL": (MEMORY_TOTAL, 1.0),
    "DCGM_FI_DEV_POWER_USAGE": (POWER, 1.0),
    "dcgm_power_usage": (POWER, 1.0),
}

# Where each fact about a GPU may be, in order of preference. Hostname became hostname on
# dcgm-exporter's main branch in 2026; exported_* is what Prometheus renames a label to when it
# clashes with its own target labels (honorLabels: false).
HOST_LABELS = ("Hostname", "hostname", "exported_Hostname", "exported_hostname")
RESOURCE_LABELS = (
    "instance_id",
    "exported_instance_id",
    "node",
    "exported_node",
    "kubernetes_node",
    "nodename",
    "node_name",
)
# The exporter's own pod: what an idle GPU shows under honorLabels: true.
EXPORTER_POD = re.compile(r"^(nvidia-)?dcgm-exporter")


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name, "").strip()
        if value:
            return value
    return ""


def _instance_host(labels: dict[str, str]) -> str:
    """The host part of Prometheus' `instance` target label (`10.0.0.7:9400` -> `10.0.0.7`):
    for a bare-metal exporter scraped by node address, the node."""
    instance = labels.get("instance", "").strip()
    if instance.startswith("["):  # [::1]:9400
        return instance[1:].split("]", 1)[0]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def gpu_info_from_labels(labels: dict[str, str], *, fallback_host: str) -> GpuInfo | None:
    """The GPU a series measures, or None for series of other entities (NVLink, CPU, switch)."""
    uuid = (labels.get("UUID") or labels.get("uuid") or "").strip()
    index_text = (labels.get("gpu") or "").strip()
    host = _first(labels, HOST_LABELS) or _instance_host(labels) or fallback_host
    if not uuid:
        if not index_text or "nvlink" in labels or "nvswitch" in labels:
            return None
        # Very old exporters name no UUID: the host and index are all there is.
        uuid = f"{host}/gpu{index_text}"
    pod = labels.get("exported_pod") or labels.get("pod") or ""
    namespace = labels.get("exported_namespace") or labels.get("namespace") or ""
    workload = ""
    if pod and not EXPORTER_POD.match(pod):
        workload = f"{namespace}/{pod}" if namespace else pod
    return GpuInfo(
        uuid=uuid,
        mig_instance=(labels.get("GPU_I_ID") or "").strip(),
        host=host,
        index=int(index_text) if index_text.isdigit() else None,
        model_name=(labels.get("modelName") or labels.get("model_name") or "").strip(),
        mig_profile=(labels.get("GPU_I_PROFILE") or "").strip(),
        resource_label=_first(labels, RESOURCE_LABELS),
        workload=workload,
    )


class _CountingLines:
    """Feeds the parser line by line and remembers which line it is on, for error messages."""

    def __init__(self, text: io.TextIOBase, name: str = ""):
        self.text = text
        self.name = name
        self.number = 0
        self.line = ""

    def __iter__(self):
        for line in self.text:
            self.number += 1
            self.line = line
            if "\x00" in line:
                raise GpuMetricsError(
                    f"{self.name}: line {self.number}: holds a NUL byte (binary data, not "
                    "Prometheus text)."
                )
            yield line


def parse(stream, *, context: ParseContext) -> Iterator[MetricBatch]:
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="strict", newline=None)
    lines = _CountingLines(text, context.name)
    default_ts = context.taken_at.timestamp() if context.taken_at else None
    window = reading_window()
    if default_ts is not None and not window[0] <= default_ts <= window[1]:
        raise GpuMetricsError(
            f"{context.name}: when it was taken (--at): {outside_window(default_ts, window)}."
        )
    columns: dict[str, tuple[list[int], list[float], list[float]]] = defaultdict(
        lambda: ([], [], [])
    )
    gpu_ids: dict[tuple, int] = {}
    found = 0
    try:
        for family in text_fd_to_metric_families(lines):
            for sample in family.samples:
                known = DCGM_METRICS.get(sample.name)
                if known is None:
                    continue
                metric, factor = known
                info = gpu_info_from_labels(sample.labels, fallback_host=context.host)
                if info is None:
                    continue
                if not info.host:
                    raise GpuMetricsError(
                        f"{context.name}: line {lines.number}: {sample.name} names no Hostname "
                        "label; say which host it is (--host, or the source's host)."
                    )
                key = tuple(sorted(sample.labels.items()))
                gpu_id = gpu_ids.get(key)
                if gpu_id is None:
                    gpu_id = gpu_ids[key] = context.gpu_id(info)
                ts = sample.timestamp if sample.timestamp is not None else default_ts
                if ts is None:
                    raise GpuMetricsError(
                        f"{context.name}: the scrape has no timestamps; say when it was taken "
                        "(--at)."
                    )
                if not window[0] <= ts <= window[1]:
                    raise GpuMetricsError(
                        f"{context.name}: line {lines.number}, the timestamp of {sample.name}: "
                        f"{outside_window(float(ts), window)}."
                    )
                gpus, times, values = columns[metric]
                gpus.append(gpu_id)
                times.append(float(ts))
                values.append(float(sample.value) * factor)
                found += 1
    except UnicodeDecodeError as exc:
        raise GpuMetricsError(
            f"{context.name}: line {lines.number + 1}: not UTF-8 text ({exc.reason})."
        ) from None
    except ValueError as exc:
        excerpt = lines.line.strip()[:120]
        detail = f" ({exc})" if str(exc) else ""
        raise GpuMetricsError(
            f"{context.name}: line {lines.number}: not Prometheus text format{detail}: {excerpt!r}"
        ) from None
    if not found:
        raise GpuMetricsError(
            f"{context.name}: no dcgm-exporter GPU metrics in it (looked for "
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, "
            "DCGM_FI_DEV_POWER_USAGE)."
        )
    for metric, (gpus, times, values) in columns.items():
        yield MetricBatch(
            np.asarray(gpus, dtype=np.int64),
            np.asarray(times, dtype=np.float64),
            {metric: clean_values(np.asarray(values, dtype=np.float64))},
        )
