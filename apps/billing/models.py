"""The bill: import runs, deliveries, cost line items (FOCUS-shaped) and the rollups pages read."""

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from apps.projects.models import Workload
from costsite.polling import PolledSource

# FOCUS exports carry 10 or more decimals; 15 keeps the smallest real line exact.
MONEY = {"max_digits": 38, "decimal_places": 15}
# CUR's fee lines of reservations and savings plans (`x_LineItemType` in a line's extra), whose
# positive cost is the commitment's unused part.
CUR_UNUSED_LINE_TYPES = ("RIFee", "SavingsPlanRecurringFee")
QUANTITY = {"max_digits": 38, "decimal_places": 15}
# Hosted-API source kinds and the API each reaches by default (api_sources.py).
API_KIND_NAMES = {
    "openai_api": "https://api.openai.com",
    "anthropic_api": "https://api.anthropic.com",
    "openrouter_api": "https://openrouter.ai",
    "litellm_api": "",
}


class CostKind(models.TextChoices):
    GPU_COMPUTE = "gpu_compute", "GPU compute"
    CPU_COMPUTE = "cpu_compute", "CPU compute"
    STORAGE = "storage", "Storage"
    NETWORK = "network", "Network"
    MODEL_API = "model_api", "Model API"
    OTHER = "other", "Other"


class TokenDirection(models.TextChoices):
    """What a model API line's tokens are: the provider prices each direction on its own."""

    INPUT = "input", "Input"
    CACHED_INPUT = "cached_input", "Cached input"
    CACHE_WRITE = "cache_write", "Cache write"
    OUTPUT = "output", "Output"
    OTHER = "other", "Other"


class AttributedBy(models.TextChoices):
    TAG = "tag", "Tag"
    RESOURCE = "resource", "Registered resource"
    RULE = "rule", "Allocation rule"
    NONE = "", "Unattributed"


class BillingSource(PolledSource):
    """A folder or an S3-compatible bucket prefix where a cloud drops its billing exports.

    Celery beat ticks a dispatcher that claims the sources due (`next_poll_at`, with a conditional
    UPDATE, as the GPU metric sources do) and polls each: every new or changed file (or CUR
    manifest) becomes an import run, once per content. S3 credentials come from the environment
    (boto3's usual chain: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, an instance role), never from
    the database.
    """

    INTERVAL_FIELD = "interval_minutes"
    INTERVAL_UNIT_SECONDS = 60

    class Kind(models.TextChoices):
        FOLDER = "folder", "Folder on the server"
        S3 = "s3", "S3-compatible bucket"
        OPENAI_API = "openai_api", "OpenAI admin API"
        ANTHROPIC_API = "anthropic_api", "Anthropic admin API"
        OPENROUTER_API = "openrouter_api", "OpenRouter activity API"
        LITELLM_API = "litellm_api", "LiteLLM proxy API"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    path = models.CharField(
        max_length=1000,
        blank=True,
        help_text="Folder only: the server folder the exports are dropped into (subfolders too).",
    )
    bucket = models.CharField(max_length=255, blank=True, help_text="S3 only: the bucket's name.")
    prefix = models.CharField(
        max_length=1000, blank=True, help_text="S3 only: the key prefix of the exports, if any."
    )
    endpoint_url = models.CharField(
        "endpoint URL",
        max_length=500,
        blank=True,
        help_text="S3 only: an S3-compatible server's URL (MinIO, Ceph); empty for AWS itself.",
    )
    region = models.CharField(max_length=50, blank=True, help_text="S3 only: the bucket's region.")
    format = models.CharField(
        max_length=30, default="auto", help_text="The export's format; auto detects it per file."
    )
    interval_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="How often to look for new files. Clouds deliver a few times a day.",
    )
    freshness_lag_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Warn when the newest charge loaded is older than this many days. "
        "Empty: the BILLING_FRESHNESS_LAG_DAYS setting.",
    )
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        help_text="Hosted API only: the environment variable holding the admin key. Empty: "
        "OPENAI_ADMIN_KEY, ANTHROPIC_ADMIN_KEY, OPENROUTER_MANAGEMENT_KEY or LITELLM_MASTER_KEY.",
    )
    restate_days = models.PositiveIntegerField(
        default=3,
        validators=[MinValueValidator(1)],
        help_text="Hosted API only: how many days before the last good poll are pulled again "
        "(the providers' figures arrive late).",
    )

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["is_paused", "next_poll_at"], name="billingsource_due_idx")]

    def __str__(self) -> str:
        return self.name

    @property
    def location(self) -> str:
        if self.kind == self.Kind.S3:
            return f"s3://{self.bucket}/{self.prefix}"
        if self.kind in API_KIND_NAMES:
            return self.endpoint_url or API_KIND_NAMES[self.kind]
        return self.path

    @property
    def lag_days(self) -> int:
        if self.freshness_lag_days is not None:
            return self.freshness_lag_days
        return settings.BILLING_FRESHNESS_LAG_DAYS


class SourcePoll(models.Model):
    """One look at a source: when, what it found, the runs it started, or why it failed."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    source = models.ForeignKey(BillingSource, on_delete=models.CASCADE, related_name="polls")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    # A re-run for a period: only files of billing periods starting in [period_start, period_end),
    # imported again whatever was seen before.
    period_start = models.DateField(null=True, blank=True)
    period_end = models.DateField(null=True, blank=True)
    files_found = models.PositiveIntegerField(default=0)
    files_new = models.PositiveIntegerField(default=0)
    files_changed = models.PositiveIntegerField(default=0)
    files_unchanged = models.PositiveIntegerField(default=0)
    runs_started = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.source} poll at {self.started_at:%Y-%m-%d %H:%M} ({self.status})"


class SourceObject(models.Model):
    """A file seen in a source, with the signature it had when imported (size and ETag or
    modification time): a file is imported again only when its signature changes."""

    source = models.ForeignKey(BillingSource, on_delete=models.CASCADE, related_name="objects_seen")
    key = models.CharField(max_length=1000, help_text="Path under the folder, or the object key.")
    size = models.BigIntegerField()
    signature = models.CharField(max_length=200, help_text="ETag, or size and mtime for a file.")
    last_modified = models.DateTimeField(null=True, blank=True)
    import_run = models.ForeignKey(
        "ImportRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    first_seen_at = models.DateTimeField(auto_now_add=True)
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.UniqueConstraint(fields=["source", "key"], name="sourceobject_one_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.source}: {self.key}"


class TrackedRun(models.Model):
    """What an import run and a re-attribution run share: who started it, when it ran, the
    heartbeat by which a stale one is claimed again, and the error it ended with."""

    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
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
        abstract = True


class ImportRun(TrackedRun):
    """One import of one or more files, all or nothing: it loads inside one transaction."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        UNCHANGED = "unchanged", "Unchanged"
        FAILED = "failed", "Failed"

    class Origin(models.TextChoices):
        COMMAND = "command", "Command line"
        UPLOAD = "upload", "Upload"
        SOURCE = "source", "Source"

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    origin = models.CharField(max_length=20, choices=Origin.choices, default=Origin.COMMAND)
    source = models.ForeignKey(
        BillingSource,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="import_runs",
    )
    poll = models.ForeignKey(
        SourcePoll, on_delete=models.SET_NULL, null=True, blank=True, related_name="import_runs"
    )
    requested_format = models.CharField(max_length=30, default="auto")
    format = models.CharField(max_length=30, blank=True, help_text="The format detected or forced.")
    paths = models.JSONField(default=list, help_text="Server-side paths of the delivery's files.")
    display_name = models.CharField(max_length=500, blank=True)
    rows_done = models.BigIntegerField(default=0)
    rows_total = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Exact for Parquet; for CSV an estimate from the bytes read until the run ends.",
    )
    line_items = models.BigIntegerField(default=0)
    billed_cost = models.JSONField(default=dict, blank=True, help_text="Currency → decimal string.")
    effective_cost = models.JSONField(default=dict, blank=True)
    results = models.JSONField(
        default=list,
        blank=True,
        help_text="One summary per delivery (or per file that failed), as the command prints them.",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="importrun_status_idx"),
            models.Index(fields=["source", "-created_at"], name="importrun_source_idx"),
        ]

    def __str__(self) -> str:
        return f"Import #{self.pk} {self.display_name} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.UNCHANGED, self.Status.FAILED}

    @property
    def seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class AttributionRun(TrackedRun):
    """One re-attribution of the history after an alias, a rule or a registered resource changed.

    Its progress (deliveries done of those in scope) is written as it goes, so the allocation page
    can poll it; `lines_changed` counts the source lines that changed owner.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    reason = models.CharField(max_length=500, blank=True, help_text="What changed, in words.")
    resource_ids = models.JSONField(
        null=True, blank=True, help_text="The resources whose history it covers; null: all."
    )
    deliveries_total = models.PositiveIntegerField(default=0)
    deliveries_done = models.PositiveIntegerField(default=0)
    lines_changed = models.BigIntegerField(default=0)
    moved = models.JSONField(
        default=list,
        blank=True,
        help_text="The spend that changed owner: per direction (from, to), owner and currency.",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"Re-attribution #{self.pk} ({self.status})"

    @property
    def is_done(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}


class Delivery(models.Model):
    """All lines of one export for one billing account and billing period: the unit replaced.

    A newer delivery for the same account and period replaces the current one; a delivery seen
    before (same fingerprint, current or replaced) changes nothing. While its run is loading it is
    `loading`, a state no other transaction ever sees.
    """

    class Status(models.TextChoices):
        LOADING = "loading", "Loading"
        CURRENT = "current", "Current"
        REPLACED = "replaced", "Replaced"

    import_run = models.ForeignKey(
        ImportRun, on_delete=models.SET_NULL, null=True, related_name="deliveries"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.LOADING)
    format = models.CharField(max_length=30)
    format_version = models.CharField(max_length=20, blank=True)
    file = models.CharField(max_length=1000, blank=True, help_text="The source file's path.")
    provider_name = models.CharField(max_length=200, blank=True)
    billing_account_id = models.CharField(max_length=200)
    billing_period_start = models.DateTimeField()
    billing_period_end = models.DateTimeField()
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the source file(s), the account and the period."
    )
    rows = models.BigIntegerField(default=0)
    line_items = models.BigIntegerField(default=0)
    billed_cost = models.JSONField(default=dict)
    effective_cost = models.JSONField(default=dict)
    # The ids of this delivery's line items lie in (first_line_id, last_line_id]: the primary key
    # finds them, so the line table needs no index on its delivery (see CostLineItem).
    first_line_id = models.BigIntegerField(default=0)
    last_line_id = models.BigIntegerField(default=0)
    first_charge_period_start = models.DateTimeField(null=True, blank=True)
    last_charge_period_start = models.DateTimeField(null=True, blank=True)
    max_charge_period_end = models.DateTimeField(null=True, blank=True)
    # The newest end of a usage line (ChargeCategory Usage, usage-based where the format says):
    # how far the bill has got. Purchases and fees cover whole periods and do not move it.
    max_usage_period_end = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    replaced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-billing_period_start", "billing_account_id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["billing_account_id", "billing_period_start"],
                condition=Q(status="current"),
                name="delivery_one_current_per_period",
            )
        ]
        indexes = [
            # "Was this delivery seen before?" at the end of every import.
            models.Index(
                fields=["billing_account_id", "billing_period_start", "fingerprint"],
                name="delivery_fingerprint_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.billing_account_id} {self.billing_period_start:%Y-%m} ({self.status})"


class CostLineItemQuerySet(models.QuerySet):
    def for_period(self, start, end) -> "CostLineItemQuerySet":
        return self.filter(charge_period_start__gte=start, charge_period_start__lt=end)

    def of_delivery(self, delivery: "Delivery") -> "CostLineItemQuerySet":
        """A delivery's lines, found through the primary key (their ids' range)."""
        lines = self.filter(delivery_id=delivery.pk)
        if delivery.last_line_id:
            lines = lines.filter(id__gt=delivery.first_line_id, id__lte=delivery.last_line_id)
        return lines


class CostLineItem(models.Model):
    """One billed line, in FOCUS's shape, with its attribution.

    A line counts on the UTC day its charge period starts. A line that several registered runs
    shared at once is stored as one part per owner (same delivery and source row), its money split
    by GPU count; the parts add up exactly to the source line.

    Pages never read this table; they read the rollups below. It is loaded with COPY, so it
    carries only what a query needs (measured on a million rows, bench/):
    - no database-level foreign keys: PostgreSQL checks each one per row, which cost 40% of the
      load. Deliveries are the only writer's unit (deleted with their lines by the import) and
      deleting a project, experiment or deployment sets null through Django as usual;
    - no index on the delivery: a delivery's lines lie in an id range the delivery records
      (`of_delivery`; an index on the delivery cost another 7%); re-attribution finds a
      resource's lines through the resource rollup's index, then by delivery; a period's lines
      are its deliveries' (Delivery is indexed by account and period).

    Two indexes serve the findings recompute, which reads lines in bulk (bench/
    findings_recompute.py, 10M lines): the runs' lines by experiment (failed runs' whole
    histories read from their pages, not from a scan of the table), and on PostgreSQL a BRIN
    index of the charge periods (migration 0012; a few hundred kB, summarised when the
    recompute starts), through which the last 30 days' reads of the levers take a month's
    pages, not the whole table.
    """

    delivery = models.ForeignKey(
        Delivery,
        on_delete=models.CASCADE,
        related_name="line_items_set",
        db_index=False,
        db_constraint=False,
    )
    source_row = models.BigIntegerField(help_text="Row in the source file (the header is row 1).")

    provider_name = models.CharField(max_length=200, blank=True)
    billing_account_id = models.CharField(max_length=200)
    billing_account_name = models.CharField(max_length=300, blank=True)
    sub_account_id = models.CharField(max_length=200, blank=True)
    sub_account_name = models.CharField(max_length=300, blank=True)
    billing_period_start = models.DateTimeField()
    billing_period_end = models.DateTimeField()
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    charge_category = models.CharField(max_length=20)
    charge_class = models.CharField(max_length=20, blank=True)
    charge_frequency = models.CharField(max_length=20, blank=True)
    charge_description = models.TextField(blank=True)
    pricing_category = models.CharField(max_length=20, blank=True)
    billing_currency = models.CharField(max_length=10)
    billed_cost = models.DecimalField(**MONEY)
    effective_cost = models.DecimalField(**MONEY)
    list_cost = models.DecimalField(**MONEY, null=True)
    contracted_cost = models.DecimalField(**MONEY, null=True)
    service_name = models.CharField(max_length=200, blank=True)
    service_category = models.CharField(max_length=100, blank=True)
    service_subcategory = models.CharField(max_length=100, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    region_name = models.CharField(max_length=200, blank=True)
    availability_zone = models.CharField(max_length=100, blank=True)
    resource_id = models.CharField(max_length=1000, blank=True)
    resource_name = models.CharField(max_length=1000, blank=True)
    resource_type = models.CharField(max_length=200, blank=True)
    sku_id = models.CharField(max_length=200, blank=True)
    sku_price_id = models.CharField(max_length=200, blank=True)
    consumed_quantity = models.DecimalField(**QUANTITY, null=True)
    consumed_unit = models.CharField(max_length=100, blank=True)
    pricing_quantity = models.DecimalField(**QUANTITY, null=True)
    pricing_unit = models.CharField(max_length=100, blank=True)
    commitment_discount_id = models.CharField(max_length=1000, blank=True)
    commitment_discount_name = models.CharField(max_length=500, blank=True)
    commitment_discount_category = models.CharField(max_length=20, blank=True)
    commitment_discount_type = models.CharField(max_length=200, blank=True)
    commitment_discount_status = models.CharField(max_length=20, blank=True)
    commitment_discount_quantity = models.DecimalField(**QUANTITY, null=True)
    commitment_discount_unit = models.CharField(max_length=100, blank=True)
    invoice_id = models.CharField(max_length=200, blank=True)
    instance_type = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveIntegerField(null=True)
    tags = models.JSONField(default=dict)
    extra = models.JSONField(default=dict, help_text="Provider columns (x_*) kept from the source.")
    # Model API spend (cost kind model_api): columns here rather than a side table, because a
    # nullable column costs a COPY next to nothing on the lines that leave it empty (one `,,`),
    # while a side table would need a second COPY stream, ids handed back from the first and a
    # join on every page. The key or project billed is the line's ResourceId (so unmapped keys
    # are unattributed resources, claimable as any) and its SubAccountId.
    model = models.CharField(max_length=200, blank=True)
    token_direction = models.CharField(max_length=20, choices=TokenDirection.choices, blank=True)
    tokens = models.DecimalField(**QUANTITY, null=True)
    requests = models.DecimalField(**QUANTITY, null=True)

    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    experiment = models.ForeignKey(
        "experiments.Experiment",
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    deployment = models.ForeignKey(
        "deployments.Deployment",
        on_delete=models.SET_NULL,
        null=True,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    cost_kind = models.CharField(max_length=20, choices=CostKind.choices)
    attributed_by = models.CharField(max_length=10, choices=AttributedBy.choices, blank=True)

    objects = CostLineItemQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(
                fields=["experiment"],
                name="lineitem_experiment_idx",
                condition=models.Q(experiment__isnull=False),
            ),
            # The unused part of commitments (a few lines in millions), which the findings read
            # by this condition or one that implies it; without it each read scanned the table.
            models.Index(
                fields=["charge_period_start"],
                name="lineitem_unused_commit_idx",
                condition=models.Q(commitment_discount_status="Unused")
                | models.Q(extra__x_LineItemType__in=CUR_UNUSED_LINE_TYPES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.charge_period_start:%Y-%m-%d %H:%M} {self.service_name} {self.resource_id}"


class CostRollup(models.Model):
    """What the daily and the monthly cost rollups share: the keys but the date, and the sums.

    Amounts are per billing currency: lines in another currency than the organisation's are kept
    in rows of their own and never summed into it. Rows are per delivery (so that replacing one
    touches only its own rows): always aggregate, never read one row as "the" figure of a key.
    """

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    cost_kind = models.CharField(max_length=20, choices=CostKind.choices)
    provider_name = models.CharField(max_length=200, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    pricing_category = models.CharField(max_length=20, blank=True)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)
    list_cost = models.DecimalField(**MONEY)
    consumed_hours = models.DecimalField(**QUANTITY, default=0)
    line_items = models.BigIntegerField()

    class Meta:
        abstract = True


class DailyCost(CostRollup):
    """UTC day × project × owner × workload × cost kind × provider × region × service × pricing."""

    day = models.DateField()

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dailycost_day_idx"),
            models.Index(fields=["project", "day"], name="dailycost_project_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.workload} {self.cost_kind} {self.billing_currency}"


class MonthlyCost(CostRollup):
    """DailyCost summed per calendar month (UTC), same keys, per delivery: what long ranges read.

    A page over a year adds up twelve months of these (about 1/30 of the daily rows) and only
    the days at the range's ragged ends from DailyCost (`selectors.rollup_rows`). Rebuilt from
    the delivery's daily rows whenever those change (`loader.monthly_rebuild`).
    """

    month = models.DateField(help_text="The month's first day.")

    class Meta:
        indexes = [
            models.Index(fields=["month"], name="monthlycost_month_idx"),
            models.Index(fields=["project", "month"], name="monthlycost_project_month_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.workload} {self.cost_kind} {self.billing_currency}"


class DailyProjectCost(models.Model):
    """DailyCost without the owner, region, service and pricing: UTC day × project × workload ×
    cost kind × provider, per delivery. What the spend pages read for figures that group and
    filter by those keys alone (the daily series, the projects' totals, the month so far):
    about a third of DailyCost's rows, since a day's runs and services fall into one row per
    project and workload. Rebuilt from the delivery's daily rows with the monthly ones
    (`loader.monthly_rebuild`); aggregate, like the other rollups."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    cost_kind = models.CharField(max_length=20, choices=CostKind.choices)
    provider_name = models.CharField(max_length=200, blank=True)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)
    list_cost = models.DecimalField(**MONEY)
    consumed_hours = models.DecimalField(**QUANTITY, default=0)
    line_items = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="projectcost_day_idx"),
            models.Index(fields=["project", "day"], name="projectcost_project_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.workload} {self.cost_kind} {self.billing_currency}"


class DailyResourceCost(models.Model):
    """UTC day × resource, with its attribution: top resources, unattributed spend, buckets.

    Per delivery, like DailyCost: aggregate.
    """

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    resource_id = models.CharField(max_length=1000)
    resource_name = models.CharField(max_length=1000, blank=True)
    billing_account_id = models.CharField(max_length=200)
    sub_account_id = models.CharField(max_length=200, blank=True)
    provider_name = models.CharField(max_length=200, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    cost_kind = models.CharField(max_length=20, choices=CostKind.choices)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)
    line_items = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dailyresource_day_idx"),
            models.Index(fields=["resource_id", "day"], name="dailyresource_resource_idx"),
            models.Index(fields=["project", "day"], name="dailyresource_project_day_idx"),
            # Unattributed spend: the rows without a project, by day. The (project, day) index
            # holds them too, but in no order the heap has, so the planner read every row of the
            # period by day instead (104,000 rows for 7,500 over 90 days at 10M lines: 43 ms; 9
            # through this index, whose entries follow the heap as the days do).
            models.Index(
                fields=["day"],
                condition=models.Q(project__isnull=True),
                name="dailyresource_unattributed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.resource_id}"


class MonthlyResourceCost(models.Model):
    """DailyResourceCost summed per calendar month (UTC), per delivery, resource, project,
    provider and currency: what a long range's unattributed spend reads for its whole months
    (about a twenty-fourth of the daily rows, a sixteenth of the unattributed ones at the
    benchmark's 10M lines; the ragged ends from the days, `spend.unattributed`).

    The names are each the month's largest, as the pages name a resource by the largest over its
    rows. Rebuilt from the delivery's daily rows whenever those change (`loader.monthly_rebuild`);
    a project deleted leaves its rows unattributed here as in the days (SET_NULL on both).
    """

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    month = models.DateField(help_text="The month's first day.")
    resource_id = models.CharField(max_length=1000)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    provider_name = models.CharField(max_length=200, blank=True)
    billing_currency = models.CharField(max_length=10)
    resource_name = models.CharField(max_length=1000, blank=True)
    billing_account_id = models.CharField(max_length=200)
    sub_account_id = models.CharField(max_length=200, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)

    class Meta:
        indexes = [
            # The overview's unattributed list and summary: a period's whole months.
            models.Index(fields=["month"], name="monthlyresource_month_idx"),
            # A project's resources over long ranges (and the SET_NULL of a deleted project).
            models.Index(fields=["project", "month"], name="monthlyresource_project_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.resource_id}"


class DailyStorageCost(models.Model):
    """UTC day × what is stored or moved: the storage and network lines, with their bytes.

    Keys: the attribution, the data class (tags, else the owner: an experiment's storage holds
    checkpoints, a deployment's the artefacts, else unclassified), the model (a model tag, else
    the owner's model), the usage class (object, block, file, vector database; internet egress,
    between regions, zones or providers), the bucket or volume (resource id, '' where the line has
    none: most transfers) and a transfer's source and destination region ("unknown" where the
    export does not say). Quantities: byte-seconds stored (a day's sum / 86,400 is the bytes
    stored that day) and bytes moved, converted by each provider's byte base (billing.storage).

    Per delivery, like DailyCost: aggregate.
    """

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    experiment = models.ForeignKey(
        "experiments.Experiment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    model = models.ForeignKey(
        "deployments.Model", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    data_class = models.CharField(max_length=20)
    usage_class = models.CharField(max_length=20)
    provider_name = models.CharField(max_length=200, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    resource_id = models.CharField(max_length=1000, blank=True)
    transfer_from = models.CharField(max_length=100, blank=True)
    transfer_to = models.CharField(max_length=100, blank=True)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)
    stored_byte_seconds = models.DecimalField(max_digits=38, decimal_places=6, default=0)
    moved_bytes = models.DecimalField(max_digits=38, decimal_places=6, default=0)
    line_items = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dailystorage_day_idx"),
            models.Index(fields=["project", "day"], name="dailystorage_project_day_idx"),
            models.Index(fields=["model", "day"], name="dailystorage_model_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.usage_class} {self.data_class} {self.resource_id}"


class StorageSummary(models.Model):
    """What the storage page's rollups of DailyStorageCost share: its rows summed, per delivery, to
    data class × usage class × transfer source and destination × currency, without the run,
    deployment, model, provider, region or bucket. Rebuilt from the delivery's storage rollup
    rows whenever those change (`loader.storage_summary_rebuild`). Aggregate, like the other
    rollups."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    data_class = models.CharField(max_length=20)
    usage_class = models.CharField(max_length=20)
    transfer_from = models.CharField(max_length=100, blank=True)
    transfer_to = models.CharField(max_length=100, blank=True)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    stored_byte_seconds = models.DecimalField(max_digits=38, decimal_places=6, default=0)
    moved_bytes = models.DecimalField(max_digits=38, decimal_places=6, default=0)

    class Meta:
        abstract = True


class DailyStorageSummary(StorageSummary):
    """UTC day × project at the storage page's grain: what a project's page, a team lead's and
    the per-project figures read. A year of the benchmark organisation is 6x fewer rows than
    DailyStorageCost (buckets and volumes add up)."""

    day = models.DateField()
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="storagesummary_day_idx"),
            models.Index(fields=["project", "day"], name="storagesummary_project_day_idx"),
            # Transfer is a few rows a day among the storage ones.
            models.Index(fields=["usage_class", "day"], name="storagesummary_usage_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.usage_class} {self.data_class}"


class MonthlyStorageSummary(StorageSummary):
    """DailyStorageSummary summed per calendar month (UTC): what the per-project figures of a long
    range read for its whole months, the ragged ends from the daily rows (as MonthlyCost is to
    DailyCost)."""

    month = models.DateField(help_text="The month's first day.")
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )

    class Meta:
        indexes = [
            models.Index(fields=["month"], name="storagemonth_month_idx"),
            models.Index(fields=["project", "month"], name="storagemonth_project_month_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.usage_class} {self.data_class}"


class DailyStorageTotal(StorageSummary):
    """UTC day at the storage page's grain for the whole organisation (what staff see, attributed
    or not): a few rows a day however many projects there are."""

    day = models.DateField()

    class Meta:
        indexes = [models.Index(fields=["day"], name="storagetotal_day_idx")]

    def __str__(self) -> str:
        return f"{self.day} {self.usage_class} {self.data_class}"


class DailyBucketStorage(models.Model):
    """UTC day × bucket or volume: the stored bytes and storage spend of the storage lines that
    name their resource, with its project and data class, per delivery. The fastest-growing
    buckets read two weeks of it: the same rows as DailyStorageCost's, a third of the width.
    Rebuilt with the storage page's other rollups. Aggregate."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    resource_id = models.CharField(max_length=1000)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    data_class = models.CharField(max_length=20)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    stored_byte_seconds = models.DecimalField(max_digits=38, decimal_places=6, default=0)

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="bucketstorage_day_idx"),
            models.Index(fields=["project", "day"], name="bucketstorage_project_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.resource_id}"


class DailyModelApiCost(models.Model):
    """UTC day × owner × provider × model × token direction of model API lines, per delivery:
    what the pages read for spend by model, tokens and cost per million tokens. Aggregate."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    project = models.ForeignKey(
        "projects.Project", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    deployment = models.ForeignKey(
        "deployments.Deployment", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    workload = models.CharField(max_length=20, choices=Workload.choices)
    provider_name = models.CharField(max_length=200, blank=True)
    resource_id = models.CharField(max_length=1000, blank=True)
    model = models.CharField(max_length=200, blank=True)
    token_direction = models.CharField(max_length=20, choices=TokenDirection.choices, blank=True)
    billing_currency = models.CharField(max_length=10)
    effective_cost = models.DecimalField(**MONEY)
    billed_cost = models.DecimalField(**MONEY)
    tokens = models.DecimalField(**QUANTITY, default=0)
    requests = models.DecimalField(**QUANTITY, default=0)
    line_items = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["day"], name="dailymodelapi_day_idx"),
            models.Index(fields=["project", "day"], name="dailymodelapi_project_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.provider_name} {self.model} {self.token_direction}"


class ModelApiKey(models.Model):
    """A hosted model API's key as billed (an API key, an OpenAI project, an Anthropic
    workspace, a LiteLLM team, a Bedrock inference profile) and the project, and optionally the
    deployment, whose calls it pays for: maintained by people, like hosts to resources.

    A model API line whose ResourceId (else SubAccountId) is the key, compared without case,
    belongs to it, unless a tag or a registered resource said otherwise; a change re-attributes
    the history through the ownership port."""

    class Kind(models.TextChoices):
        API_KEY = "api_key", "API key"
        OPENAI_PROJECT = "openai_project", "OpenAI project"
        ANTHROPIC_WORKSPACE = "anthropic_workspace", "Anthropic workspace"
        LITELLM_TEAM = "litellm_team", "LiteLLM team"
        BEDROCK_PROFILE = "bedrock_profile", "Bedrock inference profile"

    key = models.CharField(
        max_length=1000,
        help_text="As the bill names it: the line's resource id (a key, a key's hash, an "
        "inference profile's ARN) or sub-account (a project, workspace or team).",
    )
    kind = models.CharField(max_length=30, choices=Kind.choices, default=Kind.API_KEY)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.CASCADE, related_name="model_api_keys"
    )
    deployment = models.ForeignKey(
        "deployments.Deployment",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="model_api_keys",
        help_text="The serving stack that makes the calls; empty: the project alone.",
    )
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        verbose_name = "model API key"
        constraints = [
            models.UniqueConstraint(Lower("key"), name="modelapikey_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key} → {self.deployment or self.project}"
