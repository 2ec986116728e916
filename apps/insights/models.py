"""Findings (waste and levers) with their workflow and history, the runs that recompute them, and
the price catalogue (GPU instances, GPU types' memory, hosted model APIs, storage and egress)."""

from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from apps.billing.models import MONEY

# -- Findings ------------------------------------------------------------------------------------


class Kind(models.TextChoices):
    """Finding kinds, in the order of their precedence for counted-once totals: a line-hour that
    several findings share counts for the first kind here. The later parts' kinds are placed
    in this order when they are added."""

    FAILED_RUN = "failed_run", "Failed run"
    NO_SMALL_RUN = "no_small_run", "Validate small first"
    STALLED_RUN = "stalled_run", "Run that stopped converging"
    # Storage and egress (issue 18, compute_storage.py), placed where their money could meet the
    # other kinds' line-hours: a finished run's storage after its own run kinds, the storage
    # growth kinds after the GPU ones.
    STORAGE_OF_FINISHED_RUNS = "storage_of_finished_runs", "Storage of a finished run"
    UNUSED_COMMITMENT = "unused_commitment", "Unused commitment"
    NOTEBOOK_LEFT_RUNNING = "notebook_left_running", "Notebook left running"
    IDLE_BETWEEN_RUNS = "idle_between_runs", "Idle between runs"
    IDLE_GPU = "idle_gpu", "Idle GPU"
    DATA_STARVED = "data_starved", "Data-starved GPU"
    DATA_FAR_FROM_GPUS = "data_far_from_gpus", "Data far from the GPUs"
    STORAGE_SPIKE = "storage_spike", "Storage spike"
    CHECKPOINTS_ONLY_GROW = "checkpoints_only_grow", "Checkpoints that only grow"
    # Savings only (the capacity is in use): a pace of growth to hold.
    VECTOR_DB_GROWTH = "vector_db_growth", "Vector database growing fast"
    # Levers (savings, never waste): after every waste kind.
    RIGHT_SIZE = "right_size", "Right-size the GPU"
    SPOT_CANDIDATE = "spot_candidate", "Spot candidate"
    CHEAPER_REGION = "cheaper_region", "Cheaper region"
    # Inference levers (issue 20, compute_levers.py): savings of a deployment, never waste.
    CACHE_REPEATS = "cache_repeats", "Cache repeated requests"
    SCALE_TO_ZERO = "scale_to_zero", "Scale to zero"
    BATCH_REQUESTS = "batch_requests", "Batch requests"
    BATCH_NOT_REALTIME = "batch_not_realtime", "Serve in batch"
    RIGHT_SIZE_SERVING = "right_size_serving", "Right-size the serving hardware"
    SMALLER_MODEL = "smaller_model", "Try a smaller model"
    # Hosted model API spend (issue 26, compute_caching.py): a key's prompt caching.
    MODEL_API_CACHING = "model_api_caching", "Cache more of the prompt"
    UNATTRIBUTED = "unattributed", "Unattributed spend"


# The inference levers of a deployment (compute_levers.py): one subject per deployment, so they
# exclude each other (the savings total takes the largest) and any other lever on its resource.
INFERENCE_LEVER_KINDS = (
    Kind.CACHE_REPEATS,
    Kind.SCALE_TO_ZERO,
    Kind.BATCH_REQUESTS,
    Kind.BATCH_NOT_REALTIME,
    Kind.RIGHT_SIZE_SERVING,
    Kind.SMALLER_MODEL,
)
# Storage and egress (compute_storage.py): read from the storage rollup.
STORAGE_KINDS = (
    Kind.STORAGE_OF_FINISHED_RUNS,
    Kind.DATA_FAR_FROM_GPUS,
    Kind.STORAGE_SPIKE,
    Kind.CHECKPOINTS_ONLY_GROW,
    Kind.VECTOR_DB_GROWTH,
)
PRECEDENCE = {kind: rank for rank, kind in enumerate(Kind.values)}
# Spend nobody can attribute is a finding (someone should claim it) but not waste: nothing says it
# bought nothing. Its money is shown beside wasted, never in it.
NOT_WASTE_KINDS = frozenset({Kind.UNATTRIBUTED})
# Kinds built in this part: the recompute owns their findings (a kind not computed yet is never
# marked gone by it).
COMPUTED_KINDS = (
    Kind.IDLE_GPU,
    Kind.UNATTRIBUTED,
    Kind.NOTEBOOK_LEFT_RUNNING,
    Kind.IDLE_BETWEEN_RUNS,
    Kind.DATA_STARVED,
    Kind.RIGHT_SIZE,
    Kind.FAILED_RUN,
    Kind.NO_SMALL_RUN,
    Kind.STALLED_RUN,
    Kind.UNUSED_COMMITMENT,
    Kind.SPOT_CANDIDATE,
    Kind.CHEAPER_REGION,
    *INFERENCE_LEVER_KINDS,
    Kind.MODEL_API_CACHING,
    *STORAGE_KINDS,
)
# Levers whose saving _kind_store takes from the subject (right_size): never any wasted.
SAVINGS_ONLY_KINDS = frozenset({Kind.RIGHT_SIZE})
# One-off kinds save nothing per month (the money is spent); the others recur.
ONE_OFF_KINDS = frozenset({Kind.FAILED_RUN, Kind.NO_SMALL_RUN, Kind.STORAGE_SPIKE})
# Levers: savings per month only (what another way of buying would save), never waste.
LEVER_KINDS = frozenset(
    {
        Kind.RIGHT_SIZE,
        Kind.SPOT_CANDIDATE,
        Kind.CHEAPER_REGION,
        *INFERENCE_LEVER_KINDS,
        Kind.MODEL_API_CACHING,
    }
)


class Status(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    SNOOZED = "snoozed", "Snoozed"
    RESOLVED = "resolved", "Resolved"
    GONE = "gone", "Gone"


class Finding(models.Model):
    """One finding per kind and subject (`subject_key`): a recompute updates its figures and
    keeps its identity, status and history.

    The subject is a resource (`resource_id`), or for lines without one a service in an account;
    the project, experiment and deployment are those its lines are attributed to. `wasted` and
    `savings_per_month` are currency -> exact decimal string, since first seen; the waste of any
    other period is the sum of its FindingHour rows.
    """

    kind = models.CharField(max_length=40, choices=Kind.choices)
    subject_key = models.CharField(max_length=1500)
    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # finding_visible_idx leads with it
    )
    experiment = models.ForeignKey(
        "experiments.Experiment",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    deployment = models.ForeignKey(
        "deployments.Deployment",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    resource_id = models.CharField(max_length=1000, blank=True)
    billing_account_id = models.CharField(max_length=200, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    wasted = models.JSONField(default=dict, blank=True, help_text="Currency → decimal string.")
    savings_per_month = models.JSONField(
        default=dict, blank=True, help_text="Currency → decimal string (an estimate)."
    )
    # The organisation currency's wasted, for ranking (other currencies are shown apart).
    rank_amount = models.DecimalField(**MONEY, default=Decimal("0"))
    reason = models.CharField(max_length=500)
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    snoozed_until = models.DateField(null=True, blank=True)
    resolution_note = models.TextField(blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    first_seen = models.DateTimeField(null=True, blank=True, help_text="First UTC hour counted.")
    last_seen = models.DateTimeField(null=True, blank=True, help_text="Last UTC hour counted.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-rank_amount", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "subject_key"], name="finding_one_per_subject")
        ]
        indexes = [
            models.Index(fields=["status", "kind"], name="finding_status_kind_idx"),
            # Who sees which findings: the pages' sums read the days and months of the findings
            # `project_id IN (...) OR IS NULL` (and of a status or kind) in each part of a UNION,
            # and each part scanned the table (3.4 MB at 3,349 findings, a row of about 1 kB)
            # for ids this index holds in a twentieth of the pages, read without the table
            # where the visibility map is set (the recompute vacuums the table after it commits).
            models.Index(fields=["project", "status", "kind", "id"], name="finding_visible_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.resource_id or self.subject_key}"

    @property
    def is_actionable(self) -> bool:
        return self.status in {Status.OPEN, Status.ACKNOWLEDGED, Status.SNOOZED}

    def snooze_expired(self, *, today: date) -> bool:
        return (
            self.status == Status.SNOOZED
            and self.snoozed_until is not None
            and self.snoozed_until <= today
        )


class FindingSums(models.Model):
    """What a finding's rollup rows hold per currency: its wasted, and of it `alone` (FindingDay
    says which part)."""

    currency = models.CharField(max_length=10)
    wasted = models.DecimalField(**MONEY)
    alone = models.DecimalField(**MONEY)

    class Meta:
        abstract = True


class FindingDay(FindingSums):
    """A finding's hours summed per UTC day and currency (PostgreSQL): what the pages' period
    sums read. A year of a large organisation's finding-hours is millions of rows; its days are
    a twentieth of that.

    `alone` is the part of `wasted` no other waste finding shares: the wasted of the finding's
    waste hours (a waste kind, wasted > 0) whose line key, hour and currency no other finding's
    waste hour has. The line-hours two or more waste findings hold are grouped by that set of
    findings (FindingShareGroup), and counted once per group and day (FindingShareDay). Any set
    of findings' wasted, counted once, is then their days' `alone`, the days of the groups all of
    whose findings are in the set, and, for a group only some of whose findings are, its hours
    (FindingSharedHour) counted once among those findings (selectors.wasted_counted_once).
    All of these are written by the recompute, from the hours, in the transaction that writes
    the hours, for the days it recomputed (days.day_rollup_rebuild)."""

    finding = models.ForeignKey(
        Finding, on_delete=models.CASCADE, related_name="days", db_constraint=False, db_index=False
    )
    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["finding", "day", "currency"], name="findingday_one_per_day"
            )
        ]
        indexes = [models.Index(fields=["day"], name="findingday_day_idx")]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.day}"


class FindingMonth(FindingSums):
    """A finding's days summed per calendar month (PostgreSQL): what a period's sums read for the
    whole months it covers, the days only for its ragged ends (a year is 86,000 days of a large
    organisation's findings, and about a fourteenth of that in months). Rebuilt from the days by
    the same rebuild, in the same transaction, for every month a rebuilt day falls in."""

    finding = models.ForeignKey(
        Finding,
        on_delete=models.CASCADE,
        related_name="months",
        db_constraint=False,
        db_index=False,
    )
    month = models.DateField(help_text="The month's first day.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["finding", "month", "currency"], name="findingmonth_one_per_month"
            )
        ]
        indexes = [models.Index(fields=["month"], name="findingmonth_month_idx")]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.month:%Y-%m}"


class FindingDayHours(models.Model):
    """A finding's hours summed per UTC day, currency and whether a GPU reported (PostgreSQL):
    what a recompute's refresh of a finding reads of its days outside the period it wrote. A
    finding's figures are its whole life's hours, and a failed run's storage is three years of
    hours at three years of bills (each month's recompute summed 15M of them again). Rebuilt
    with FindingDay, from the hours, for the days whose hours changed (days.day_rollup_rebuild).
    """

    finding = models.ForeignKey(
        Finding, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    currency = models.CharField(max_length=10)
    measured = models.BooleanField()
    hours = models.PositiveIntegerField(help_text="Distinct hours.")
    spend = models.DecimalField(**MONEY)
    wasted = models.DecimalField(**MONEY)
    first_wasted = models.DateTimeField(null=True, help_text="First hour with something wasted.")
    last_wasted = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["finding", "day", "currency", "measured"], name="findingdayhours_one"
            )
        ]
        indexes = [models.Index(fields=["day"], name="findingdayhours_day_idx")]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.day}"


class FindingDayOwner(models.Model):
    """A finding's spend per UTC day and attribution of its hours (PostgreSQL): with
    FindingDayHours, what the refresh reads of the days outside the recomputed period to name
    the project, experiment or deployment of most of a finding's spend."""

    finding = models.ForeignKey(
        Finding, on_delete=models.CASCADE, related_name="+", db_constraint=False, db_index=False
    )
    day = models.DateField()
    project_id = models.BigIntegerField(null=True)
    experiment_id = models.BigIntegerField(null=True)
    deployment_id = models.BigIntegerField(null=True)
    spend = models.DecimalField(**MONEY)

    class Meta:
        indexes = [
            models.Index(fields=["finding", "day"], name="findingdayowner_finding_idx"),
            models.Index(fields=["day"], name="findingdayowner_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.day}"


class FindingShareGroup(models.Model):
    """A set of two or more waste findings that hold the same line-hours (a few hundred sets in a
    large organisation's year, against hundreds of thousands of such line-hours)."""

    members = models.TextField(unique=True, help_text="The findings' ids, sorted, comma-separated.")
    size = models.PositiveIntegerField()

    def __str__(self) -> str:
        return self.members


class FindingShareMember(models.Model):
    group = models.ForeignKey(FindingShareGroup, on_delete=models.CASCADE, related_name="+")
    finding = models.ForeignKey(
        Finding, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )

    def __str__(self) -> str:
        return f"{self.group_id}: {self.finding_id}"


class FindingShareDay(models.Model):
    """A group's line-hours of one UTC day and currency, each counted once (the least of its
    findings' wasted summed and its spend), summed."""

    group = models.ForeignKey(FindingShareGroup, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    currency = models.CharField(max_length=10)
    counted = models.DecimalField(**MONEY)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["group", "day", "currency"], name="findingshareday_one_per_day"
            )
        ]
        indexes = [models.Index(fields=["day"], name="findingshareday_day_idx")]

    def __str__(self) -> str:
        return f"{self.group_id} {self.day}"


class FindingSharedHour(models.Model):
    """A waste finding-hour whose line-hour other waste findings hold too (its group's), a copy
    of its FindingHour's columns: what a set holding only some of a group's findings counts,
    hour by hour."""

    # Indexed by finding: a finding's delete (a stillborn one, in the admin) finds its rows.
    finding = models.ForeignKey(
        Finding, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    group = models.ForeignKey(
        FindingShareGroup, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    line_key = models.CharField(max_length=1500)
    hour = models.DateTimeField()
    currency = models.CharField(max_length=10)
    wasted = models.DecimalField(**MONEY)
    spend = models.DecimalField(**MONEY)

    class Meta:
        indexes = [
            models.Index(fields=["group", "hour"], name="findingshared_group_idx"),
            models.Index(fields=["hour"], name="findingshared_hour_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.hour:%Y-%m-%d %H:00} (shared)"


class FindingEvent(models.Model):
    """One change of a finding's status: who, when, from what to what, and the note."""

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=20, choices=Status.choices, blank=True)
    to_status = models.CharField(max_length=20, choices=Status.choices)
    snoozed_until = models.DateField(null=True, blank=True)
    note = models.TextField(blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.finding_id}: {self.from_status or '-'} → {self.to_status}"


class FindingHour(models.Model):
    """A finding's money in one UTC hour of one line key (the resource, or the account and
    service): what periods sum and what counted-once totals de-duplicate (per line key, hour and
    currency, the kind of highest precedence counts)."""

    # Written in bulk only by the recompute, for findings it has just read or made, and deleted
    # with them through Django's cascade: no database constraint (PostgreSQL checked each of a
    # first recompute's 2.4 million hours at its commit) and no index of its own (the finding
    # and hour index serves every lookup by finding).
    finding = models.ForeignKey(
        Finding,
        on_delete=models.CASCADE,
        related_name="hours",
        db_constraint=False,
        db_index=False,
    )
    line_key = models.CharField(max_length=1500)
    hour = models.DateTimeField()
    currency = models.CharField(max_length=10)
    wasted = models.DecimalField(**MONEY)
    spend = models.DecimalField(**MONEY, help_text="The lines' EffectiveCost in the hour.")
    measured = models.BooleanField(
        default=True, help_text="False: no GPU of the resource reported (never idle nor busy)."
    )
    idle_share = models.DecimalField(max_digits=12, decimal_places=10, null=True, blank=True)
    # The attribution of the hour's lines (the finding takes that of most of its spend).
    project_id = models.BigIntegerField(null=True, blank=True)
    experiment_id = models.BigIntegerField(null=True, blank=True)
    deployment_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["finding", "hour"]
        indexes = [
            models.Index(fields=["finding", "hour"], name="findinghour_finding_idx"),
            models.Index(fields=["hour"], name="findinghour_hour_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.finding_id} {self.hour:%Y-%m-%d %H:00}"


class RecomputeLine(models.Model):
    """A line item as a findings recompute reads it on PostgreSQL: the period's GPU-compute lines
    and lines with no project, and every line of the failed runs, copied once at the start into
    a temporary table of this name (compute.lines_shared), which the kinds reading them query
    instead of the line table (one scan of it, not one per kind). No table of its own: the
    temporary one is dropped when the recompute's transaction ends."""

    resource_id = models.CharField(max_length=1000)
    billing_account_id = models.CharField(max_length=200)
    service_name = models.CharField(max_length=200)
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    cost_kind = models.CharField(max_length=20)
    project_id = models.BigIntegerField(null=True)
    experiment_id = models.BigIntegerField(null=True)
    deployment_id = models.BigIntegerField(null=True)

    class Meta:
        managed = False
        db_table = "insights_lines_tmp"

    def __str__(self) -> str:
        return f"{self.resource_id} {self.charge_period_start:%Y-%m-%d %H:%M}"


class InsightsSettings(models.Model):
    """The organisation's thresholds for findings (one row, written when first saved: until then
    reads get the defaults in memory, so a page view never writes)."""

    unattributed_threshold = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=Decimal("10"),
        validators=[MinValueValidator(0)],
        help_text="A resource's unattributed spend (since first seen, organisation currency) "
        "must exceed this to be a finding.",
    )
    idle_gpu_min_share_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("25"),
        validators=[MinValueValidator(0)],
        help_text="An idle GPU finding needs at least this share of its measured GPU spend idle: "
        "a busy GPU's few idle samples are no finding.",
    )
    notebook_idle_hours = models.PositiveIntegerField(
        default=8,
        validators=[MinValueValidator(1)],
        help_text="A notebook left running: at least this many consecutive billed hours, each "
        "at least 90% idle.",
    )
    data_starved_target_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("40"),
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text="A training run whose GPUs' mean utilisation is under this target is "
        "data-starved.",
    )

    # Part 3: training levers. Per-run overrides are experiment tags (README, "Waste findings").
    loss_metric = models.CharField(
        max_length=100,
        default="loss",
        help_text="The metric a run's convergence is read from (tag loss_metric overrides).",
    )
    stall_threshold_percent = models.DecimalField(
        max_digits=6,
        decimal_places=3,
        default=Decimal("1"),
        validators=[MinValueValidator(0)],
        help_text="A run is stalled when its loss's tail improves on the best before it by less "
        "than this share of it.",
    )
    small_run_hours = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=Decimal("3"),
        validators=[MinValueValidator(0)],
        help_text="A big run (8 GPUs or more) that failed or stopped within this many hours with "
        "no smaller run before it is a 'validate small first' finding.",
    )
    spot_interruptions_per_hour = models.DecimalField(
        max_digits=8,
        decimal_places=5,
        default=Decimal("0.05"),
        validators=[MinValueValidator(0)],
        help_text="Expected spot interruptions per instance-hour (tag "
        "spot_interruptions_per_hour overrides).",
    )
    checkpoint_interval_hours = models.DecimalField(
        max_digits=8,
        decimal_places=3,
        default=Decimal("1"),
        validators=[MinValueValidator(0)],
        help_text="Hours between a run's checkpoints: an interruption re-runs half of one on "
        "average (tag checkpoint_interval_hours overrides).",
    )

    # Storage and egress (issue 18).
    checkpoint_growth_weeks = models.PositiveIntegerField(
        default=6,
        validators=[MinValueValidator(2)],
        help_text="Checkpoints that only grow: this many weeks in a row without a week of "
        "decrease.",
    )
    finished_run_storage_days = models.PositiveIntegerField(
        default=14,
        help_text="Storage of a finished run counts from this many days after it ended.",
    )
    vector_db_growth_percent_per_month = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=Decimal("20"),
        validators=[MinValueValidator(0)],
        help_text="A vector database growing faster than this percent in 30 days is a finding.",
    )
    storage_spike_factor = models.DecimalField(
        max_digits=6,
        decimal_places=2,
        default=Decimal("2"),
        validators=[MinValueValidator(1)],
        help_text="A week of a bucket's storage spend at least this many times its trend (the "
        "mean of the four weeks before) is a spike.",
    )
    storage_spike_weeks = models.PositiveIntegerField(
        default=6,
        validators=[MinValueValidator(1)],
        help_text="Storage spikes are looked for in this many last weeks.",
    )

    class Meta:
        verbose_name = "insights settings"
        verbose_name_plural = "insights settings"

    def __str__(self) -> str:
        return "Insights settings"

    @classmethod
    def get(cls) -> "InsightsSettings":
        """The saved row, or an unsaved one with the defaults (`save()` writes it)."""
        return cls.objects.order_by("pk").first() or cls()


class RecomputeRun(models.Model):
    """One recompute of the findings for `[start, end)` (null: all the data).

    Runs are executed one at a time: the executor claims the single RecomputeLock row with a
    conditional UPDATE (taking it over when its heartbeat is stale) and then drains every queued
    run, so a run that found the lock held is done by the holder rather than lost.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    start = models.DateField(null=True, blank=True)
    end = models.DateField(null=True, blank=True)
    reason = models.CharField(max_length=100, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "created_at"], name="recomputerun_status_idx")]

    def __str__(self) -> str:
        return f"Findings recompute #{self.pk} ({self.status})"


class RecomputeLock(models.Model):
    """The one row a recompute claims: who holds it and its last sign of life."""

    holder = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Recompute lock ({self.holder or 'free'})"


# -- The price catalogue --------------------------------------------------------------------------


class CatalogueRow(models.Model):
    """What every catalogue row keeps: where it came from and as of when."""

    source = models.CharField(max_length=1000, help_text="File (and row) or URL it came from.")
    as_of = models.DateField(help_text="When the price was collected.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class GpuInstancePrice(CatalogueRow):
    """An instance's hourly price (on-demand and spot) per provider and region, in `currency`."""

    provider = models.CharField(max_length=50)
    instance_type = models.CharField(
        max_length=100, blank=True, help_text="Empty: the accelerator alone (GCP attachment)."
    )
    gpu_type = models.CharField(max_length=100)
    gpu_count = models.DecimalField(max_digits=8, decimal_places=3)
    vcpus = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    memory_gib = models.DecimalField(max_digits=10, decimal_places=2, null=True, blank=True)
    region = models.CharField(max_length=100)
    currency = models.CharField(max_length=3, default="USD")
    on_demand_per_hour = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    spot_per_hour = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)

    class Meta:
        ordering = ["provider", "instance_type", "region"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "instance_type", "gpu_type", "gpu_count", "region"],
                name="gpuinstanceprice_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.instance_type or self.gpu_type} {self.region}"


class GpuTypeMemory(CatalogueRow):
    """A GPU type's memory per GPU, from the vendor's data sheet."""

    gpu_type = models.CharField(max_length=100, unique=True)
    memory_gb = models.DecimalField(
        max_digits=8, decimal_places=2, help_text="Per GPU, in GB as the data sheet gives it."
    )
    vendor = models.CharField(max_length=50)

    class Meta:
        ordering = ["gpu_type"]
        verbose_name = "GPU type memory"
        verbose_name_plural = "GPU types' memory"

    def __str__(self) -> str:
        return f"{self.gpu_type} {self.memory_gb} GB"


class ModelApiPrice(CatalogueRow):
    """A hosted model API's prices per token (input, output, cached input, batch where known)."""

    name = models.CharField(max_length=300, unique=True)
    provider = models.CharField(max_length=100, blank=True)
    mode = models.CharField(max_length=50, blank=True)
    currency = models.CharField(max_length=3, default="USD")
    input_per_token = models.DecimalField(max_digits=20, decimal_places=15, null=True, blank=True)
    output_per_token = models.DecimalField(max_digits=20, decimal_places=15, null=True, blank=True)
    cached_input_per_token = models.DecimalField(
        max_digits=20, decimal_places=15, null=True, blank=True
    )
    batch_input_per_token = models.DecimalField(
        max_digits=20, decimal_places=15, null=True, blank=True
    )
    batch_output_per_token = models.DecimalField(
        max_digits=20, decimal_places=15, null=True, blank=True
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class StorageEgressPrice(CatalogueRow):
    """A storage or egress price per unit (GB-month, GB) for a volume tier."""

    provider = models.CharField(max_length=50)
    service = models.CharField(max_length=100)
    item = models.CharField(max_length=100)
    region = models.CharField(max_length=200)
    volume_tier = models.CharField(max_length=200, blank=True)
    unit = models.CharField(max_length=50)
    currency = models.CharField(max_length=3, default="USD")
    price = models.DecimalField(max_digits=14, decimal_places=6)
    source_kind = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["provider", "service", "item", "region"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "service", "item", "region", "volume_tier"],
                name="storageegressprice_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.item} {self.region} {self.volume_tier}"


def hour_floor(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


# -- Build or call (issue 19) ---------------------------------------------------------------------
# Kept apart from the findings above: the inputs a lead saves for a deployment's build-or-call
# page, and the organisation's thresholds for the traffic shape. The computation is
# build_or_call.py; reads selectors_build_or_call.py, writes services_build_or_call.py.


class BuildOrCallInputs(models.Model):
    """A deployment's saved build-or-call inputs; an empty field takes the default (the
    organisation's engineering hours, the observed volume, capacity and latency objective)."""

    deployment = models.OneToOneField(
        "deployments.Deployment", on_delete=models.CASCADE, related_name="build_or_call_inputs"
    )
    # The catalogue's unique name, not a key: reloading the catalogue replaces its rows.
    api_model = models.CharField(max_length=300, blank=True)
    api_serves_fine_tuned = models.BooleanField(
        "the API's provider can serve our fine-tuned model", default=False
    )
    expected_requests_per_hour = models.DecimalField(
        max_digits=16, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    engineering_hours_per_month = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    capacity_per_replica_hour = models.DecimalField(
        "requests one replica serves per hour",
        max_digits=16,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.01"))],
    )
    latency_objective_ms = models.PositiveIntegerField(null=True, blank=True)
    # The other way (issue 26): a deployment served by a hosted API, against self-hosting it.
    open_weights = models.BooleanField(
        "the model's weights are open (it can be self-hosted)", default=False
    )
    model_memory_gb = models.DecimalField(
        "GPU memory one replica needs (GB: weights and KV cache)",
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0.01"))],
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "build-or-call inputs"
        verbose_name_plural = "build-or-call inputs"

    def __str__(self) -> str:
        return f"Build or call: {self.deployment}"


class BuildOrCallSettings(models.Model):
    """The thresholds that name a traffic shape "low or spiky" or "high and steady" (one row)."""

    low_requests_per_hour = models.DecimalField(
        max_digits=16,
        decimal_places=2,
        default=Decimal("100"),
        help_text="Under this mean volume, traffic is low.",
    )
    high_requests_per_hour = models.DecimalField(
        max_digits=16,
        decimal_places=2,
        default=Decimal("1000"),
        help_text="From this mean volume, traffic is high.",
    )
    spiky_idle_share = models.DecimalField(
        max_digits=5,
        decimal_places=4,
        default=Decimal("0.25"),
        help_text="From this share of hours without traffic, traffic is spiky.",
    )
    spiky_variation = models.DecimalField(
        max_digits=8,
        decimal_places=4,
        default=Decimal("1"),
        help_text="From this coefficient of variation of hourly requests, traffic is spiky.",
    )
    steady_variation = models.DecimalField(
        max_digits=8,
        decimal_places=4,
        default=Decimal("0.5"),
        help_text="Up to this coefficient of variation, traffic is steady.",
    )

    class Meta:
        verbose_name = "build-or-call settings"
        verbose_name_plural = "build-or-call settings"

    def __str__(self) -> str:
        return "Build-or-call settings"

    @classmethod
    def get(cls) -> "BuildOrCallSettings":
        row = cls.objects.order_by("pk").first()
        return row or cls.objects.create()
