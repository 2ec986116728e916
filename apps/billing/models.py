"""The bill: import runs, deliveries, cost line items (FOCUS-shaped) and the rollups pages read."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.projects.models import Workload

# FOCUS exports carry 10 or more decimals; 15 keeps the smallest real line exact.
MONEY = {"max_digits": 38, "decimal_places": 15}
QUANTITY = {"max_digits": 38, "decimal_places": 15}


class CostKind(models.TextChoices):
    GPU_COMPUTE = "gpu_compute", "GPU compute"
    CPU_COMPUTE = "cpu_compute", "CPU compute"
    STORAGE = "storage", "Storage"
    NETWORK = "network", "Network"
    OTHER = "other", "Other"


class AttributedBy(models.TextChoices):
    TAG = "tag", "Tag"
    RESOURCE = "resource", "Registered resource"
    RULE = "rule", "Allocation rule"
    NONE = "", "Unattributed"


class ImportRun(models.Model):
    """One import of one or more files, all or nothing: it loads inside one transaction."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        UNCHANGED = "unchanged", "Unchanged"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
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
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "-created_at"], name="importrun_status_idx")]

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
    - no index but the primary key: a delivery's lines lie in an id range the delivery records
      (`of_delivery`; an index on the delivery cost another 7%); re-attribution finds a
      resource's lines through the resource rollup's index, then by delivery; a period's lines
      are its deliveries' (Delivery is indexed by account and period).
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

    def __str__(self) -> str:
        return f"{self.charge_period_start:%Y-%m-%d %H:%M} {self.service_name} {self.resource_id}"


class DailyCost(models.Model):
    """UTC day × project × owner × workload × cost kind × provider × region × service × pricing.

    Amounts are per billing currency: lines in another currency than the organisation's are kept
    in rows of their own and never summed into it. Rows are per delivery (so that replacing one
    touches only its own rows): always aggregate, never read one row as "the" figure of a key.
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
        indexes = [
            models.Index(fields=["day"], name="dailycost_day_idx"),
            models.Index(fields=["project", "day"], name="dailycost_project_day_idx"),
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
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.resource_id}"
