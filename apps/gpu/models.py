"""GPU metrics: where they come from, the GPUs they describe, and the hourly rollup pages read."""

import re
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from costsite.polling import PolledSource


def validate_http_url(value: str) -> None:
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
    except ValueError:  # urlsplit refuses some, e.g. http://[::1 (an IPv6 host without its ])
        parts, hostname = None, None
    if parts is None or parts.scheme not in ("http", "https") or not hostname:
        raise ValidationError(
            "Enter an http:// or https:// URL with a host, e.g. http://node:9400/metrics."
        )


class MetricSource(PolledSource):
    """An endpoint costsite polls on a schedule: a dcgm-exporter to scrape or a Prometheus to pull.

    `next_poll_at` is claimed by the dispatcher task with a conditional UPDATE, so two beat ticks
    never poll a source twice; `pulled_until` is the end of the last Prometheus window imported,
    so a pull after an outage starts where the last good one stopped and nothing is lost.
    """

    INTERVAL_FIELD = "interval_seconds"

    class Kind(models.TextChoices):
        DCGM = "dcgm", "dcgm-exporter scrape"
        PROMETHEUS = "prometheus", "Prometheus query_range pull"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # Not a URLField: Django's URL validator refuses single-label hosts, and exporters are reached
    # by exactly those (http://rack-1:9400/metrics, a Kubernetes service name).
    url = models.CharField(
        "URL",
        max_length=500,
        validators=[validate_http_url],
        help_text="dcgm-exporter: the /metrics URL (http://node:9400/metrics). "
        "Prometheus: the server's base URL (http://prometheus:9090).",
    )
    host = models.CharField(
        max_length=255,
        blank=True,
        help_text="The GPUs' host when the series name none (an exporter run with "
        "--no-hostname). Empty: the exporter URL's host; for Prometheus, each series' instance.",
    )
    series_selector = models.CharField(
        max_length=500,
        blank=True,
        help_text='Prometheus only: label matchers added to every query, e.g. job="gpu-metrics".',
    )
    interval_seconds = models.PositiveIntegerField(
        default=60, help_text="How often to poll. dcgm-exporter refreshes every 30 s by default."
    )
    step_seconds = models.PositiveIntegerField(
        default=60, help_text="Prometheus only: the query_range step (resolution)."
    )
    query_window_minutes = models.PositiveIntegerField(
        default=60,
        help_text="Prometheus only: how far back the first pull reaches. Later pulls start where "
        "the previous one ended.",
    )
    last_samples = models.PositiveIntegerField(
        default=0, help_text="Samples the last successful poll counted."
    )
    pulled_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        # The dispatcher's query: sources due now.
        indexes = [models.Index(fields=["is_paused", "next_poll_at"], name="metricsource_due_idx")]

    def __str__(self) -> str:
        return self.name

    @property
    def fallback_host(self) -> str:
        return self.host or (urlsplit(self.url).hostname or "")


class Gpu(models.Model):
    """A physical GPU, or a MIG instance of one (then `parent` is the physical GPU).

    The UUID is the stable key (nvidia-smi and dcgm-exporter agree on it, and it survives reboots
    and re-indexing); the host is where it was last seen.
    """

    uuid = models.CharField(max_length=200)
    mig_instance = models.CharField(
        max_length=20, blank=True, help_text="DCGM's GPU_I_ID; empty for a whole GPU."
    )
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="mig_instances"
    )
    host = models.CharField(max_length=255, blank=True, db_index=True)
    index = models.PositiveIntegerField(null=True, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    mig_profile = models.CharField(max_length=50, blank=True)
    share = models.FloatField(
        default=1.0,
        help_text="The fraction of a physical GPU this row stands for: 1, or a MIG instance's "
        "compute slices over the GPU's.",
    )
    resource_label = models.CharField(
        max_length=1000,
        blank=True,
        help_text="A billed resource id named on the series itself (instance_id, a node name).",
    )
    workload = models.CharField(
        max_length=500, blank=True, help_text="namespace/pod last seen on it (Kubernetes)."
    )
    first_seen_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["host", "index", "uuid", "mig_instance"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["uuid", "mig_instance"], name="gpu_unique_uuid_mig")
        ]

    def __str__(self) -> str:
        name = f"{self.host or '?'} #{self.index if self.index is not None else '?'}"
        if self.mig_instance:
            name += f" MIG {self.mig_profile or self.mig_instance}"
        return name

    @property
    def physical_id(self) -> int:
        return self.parent_id or self.pk


# RFC 1123 host names, a little looser (underscores, as some clusters name nodes): dot-separated
# labels of letters, digits, hyphens and underscores, 1-63 characters each, no hyphen at either
# end, 253 characters in all. IPv4 addresses are such names too.
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
HOST_NAME_RULE = (
    "A host name is labels of letters, digits, hyphens and underscores separated by single dots "
    "(gpu-node-7, ip-10-0-0-7.ec2.internal): each label 1 to 63 characters, not starting or "
    "ending with a hyphen, 253 characters in all."
)


def host_name_problem(value: str) -> str | None:
    """Why `value` is not a host name a metric can carry, or None when it is one."""
    if any(ch.isspace() for ch in value):
        return "A host name has no spaces in it."
    if len(value) > 253 or not HOST_NAME.fullmatch(value):
        return HOST_NAME_RULE
    return None


class HostMapping(models.Model):
    """A host (as the metrics name it) and the billed resource id it is: maintained by people."""

    host = models.CharField(max_length=255, unique=True)
    resource_id = models.CharField(max_length=1000, db_index=True)
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["host"]

    def __str__(self) -> str:
        return f"{self.host} → {self.resource_id}"


class GpuHour(models.Model):
    """One GPU (or MIG instance) in one UTC hour: the rollup every page reads.

    `state` keeps what a later import needs to merge into this row without counting a sample twice:
    per metric the running sums and counts, and the stretches of time already counted.
    Utilisation is in percent (0-100), memory in MiB, power in watts.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField(help_text="Start of the UTC hour.")
    samples = models.PositiveIntegerField(default=0)
    util_samples = models.PositiveIntegerField(default=0)
    util_mean = models.FloatField(null=True, blank=True)
    util_max = models.FloatField(null=True, blank=True)
    idle_share = models.FloatField(
        null=True, blank=True, help_text="Share of utilisation samples under the idle threshold."
    )
    memory_used_mib = models.FloatField(null=True, blank=True)
    memory_used_max_mib = models.FloatField(null=True, blank=True)
    memory_total_mib = models.FloatField(null=True, blank=True)
    power_watts = models.FloatField(null=True, blank=True)
    power_max_watts = models.FloatField(null=True, blank=True)
    idle_threshold_percent = models.DecimalField(
        max_digits=5, decimal_places=2, default=Decimal("10")
    )
    state = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gpu", "hour"]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "hour"], name="gpuhour_unique_gpu_hour")
        ]
        # The fleet page and the per-owner selectors read a window of hours across all GPUs.
        indexes = [models.Index(fields=["hour"], name="gpuhour_hour_idx")]

    def __str__(self) -> str:
        return f"{self.gpu} {self.hour:%Y-%m-%d %H:00}"


class MetricImport(models.Model):
    """One metrics file imported by the command or a task: what it held and how it ended."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        UNCHANGED = "unchanged", "Unchanged"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    path = models.CharField(max_length=1000)
    requested_format = models.CharField(max_length=30, default="auto")
    format = models.CharField(max_length=30, blank=True)
    host = models.CharField(max_length=255, blank=True, help_text="--host")
    time_zone = models.CharField(max_length=64, blank=True, help_text="--timezone")
    taken_at = models.DateTimeField(null=True, blank=True, help_text="--at")
    samples = models.BigIntegerField(default=0)
    gpus = models.PositiveIntegerField(default=0)
    hours = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last sign of life of the process running it; a stale one may be claimed again.",
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"GPU metrics import #{self.pk} {self.path} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.UNCHANGED, self.Status.FAILED}


class GpuSegment(models.Model):
    """A stretch of one GPU's time during which the same projects' registrations cover it.

    Derived from the registrations (their windows) and how GPUs join the bill (labels, host
    mappings, registered host names); `projects` is the sorted ids as ",3,7," ("" never stored:
    time no registration covers has no segment). The daily rollup reads it to give each GPU-hour
    the set of projects it counts for, once, however many registrations overlap.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    end = models.DateTimeField()
    projects = models.CharField(max_length=1000)

    class Meta:
        indexes = [models.Index(fields=["gpu", "start"], name="gpusegment_gpu_start_idx")]

    def __str__(self) -> str:
        return (
            f"{self.gpu_id} {self.start:%Y-%m-%d %H:%M}–{self.end:%Y-%m-%d %H:%M} {self.projects}"
        )


class GpuDay(models.Model):
    """The fleet page's rollup: one GPU (or MIG instance) in one UTC day, for one set of projects
    (`projects` as in GpuSegment, "" for time no project's registration covers).

    Counted GPU-hours only (with utilisation samples), each its GPU's share; the bands split the
    GPU-hours by each hour's mean utilisation, at the organisation's idle threshold the rollup was
    built with (GpuRollupState.threshold). Rebuilt from GpuHour by apps/gpu/daily.py, never edited.
    """

    day = models.DateField()
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+")
    projects = models.CharField(max_length=1000, blank=True)
    gpu_hours = models.FloatField()
    weighted_util = models.FloatField(help_text="Sum of mean utilisation times share.")
    idle_gpu_hours = models.FloatField()
    band_idle = models.FloatField()
    band_low = models.FloatField()
    band_moderate = models.FloatField()
    band_busy = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "gpu", "projects"], name="gpuday_unique_day_gpu_projects"
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu_id} {self.day} {self.projects or '-'}"


class GpuModelDay(models.Model):
    """GpuDay summed over the GPUs of one model: one row per UTC day, GPU model and set of
    projects, what the fleet page's charts, totals, model and project tables read (a year of a
    fleet of 10,000 GPUs: 56,000 GpuDay rows, a few thousand of these). Rebuilt with GpuDay."""

    day = models.DateField()
    model_name = models.CharField(max_length=200, blank=True)
    projects = models.CharField(max_length=1000, blank=True)
    gpu_hours = models.FloatField()
    weighted_util = models.FloatField()
    idle_gpu_hours = models.FloatField()
    band_idle = models.FloatField()
    band_low = models.FloatField()
    band_moderate = models.FloatField()
    band_busy = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "model_name", "projects"], name="gpumodelday_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.model_name or '?'} {self.projects or '-'}"


class GpuMonth(models.Model):
    """GpuDay summed per calendar month: one row per GPU, month (its first day) and set of
    projects. The GPU table and its GPUs per model read whole months of a long range here and
    the ragged ends from GpuDay (costsite.months.rollup_plan): a year of the benchmark's fleet
    is 12,000 rows here against 56,000 days, since a GPU is mostly busy for days at a time in
    the same month. Per GPU only the three sums the table shows; rebuilt with GpuDay."""

    month = models.DateField()
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+")
    projects = models.CharField(max_length=1000, blank=True)
    gpu_hours = models.FloatField()
    weighted_util = models.FloatField()
    idle_gpu_hours = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["month", "gpu", "projects"], name="gpumonth_unique_month_gpu_projects"
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu_id} {self.month:%Y-%m} {self.projects or '-'}"


class GpuRollupState(models.Model):
    """One row: what of the daily rollup is out of date. `stale_all`: everything (aliases,
    rules, mappings or GPUs' hosts changed, or it was never built); else the UTC days
    [stale_from, stale_until) when set (new GPU-hours), and the GPUs of GpuRollupStaleGpu (a
    registration that reaches them changed). Cleared by the rebuild, under a lock."""

    stale_all = models.BooleanField(default=True)
    stale_from = models.DateField(null=True, blank=True)
    stale_until = models.DateField(null=True, blank=True)
    threshold = models.DecimalField(max_digits=5, decimal_places=2, null=True, blank=True)
    built_at = models.DateTimeField(null=True, blank=True)
    # Counts the rebuilds: what the fleet page's cached HTML is keyed by (a clock may repeat).
    builds = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return "GPU rollup state"


class GpuRollupStaleGpu(models.Model):
    """A GPU whose rows of the daily rollup are out of date: a registration that reaches it was
    added, removed or moved (the `ownership_changed` port with its resource ids). Written with
    ON CONFLICT DO NOTHING by any number of writers at once, and deleted by the rebuild that
    brought the GPU up to date."""

    gpu = models.OneToOneField(Gpu, on_delete=models.CASCADE, primary_key=True, related_name="+")

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} out of date"


class TrafficSource(PolledSource):
    """A deployment's request counter in Prometheus, pulled an hour at a time: `requests_query`
    is a PromQL expression of the requests in the hour before each point, e.g.
    `sum(increase(vllm:request_success_total{model_name="chat"}[1h]))`; the GPU app's Prometheus
    client pulls it (query_range, step one hour) and writes the deployment's hourly traffic
    through the deployments app. `pulled_until` is the last whole hour written."""

    INTERVAL_FIELD = "interval_seconds"

    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.CASCADE, related_name="traffic_sources"
    )
    url = models.CharField(
        "URL",
        max_length=500,
        validators=[validate_http_url],
        help_text="The Prometheus server's base URL (http://prometheus:9090).",
    )
    requests_query = models.CharField(
        max_length=2000,
        help_text="PromQL of the requests in the hour before each point: "
        "sum(increase(<counter>{<matchers>}[1h])).",
    )
    interval_seconds = models.PositiveIntegerField(
        default=900, help_text="How often to poll (a new hour is there once an hour)."
    )
    query_window_hours = models.PositiveIntegerField(
        default=24, help_text="How far back the first pull reaches."
    )
    pulled_until = models.DateTimeField(null=True, blank=True)
    last_samples = models.PositiveIntegerField(
        default=0, help_text="Hours the last successful poll wrote."
    )

    class Meta:
        ordering = ["deployment", "pk"]

    def __str__(self) -> str:
        return f"Traffic of {self.deployment} from {self.url}"
