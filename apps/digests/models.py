"""Who is mailed what: subscriptions to digests, the deliveries (one per recipient and period,
claimed before sending), and alerts (open until they clear) with the settings that trigger them."""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.billing.models import MONEY


class Frequency(models.TextChoices):
    WEEKLY = "weekly", "Weekly"
    DAILY = "daily", "Daily"


class DigestSettings(models.Model):
    """The organisation's digest and alert settings (one row, made with defaults when read)."""

    send_hour = models.PositiveSmallIntegerField(
        default=8,
        validators=[MaxValueValidator(23)],
        help_text="The hour (organisation's time zone) digests go out: Mondays for weekly ones.",
    )
    budget_alerts = models.BooleanField(
        default=True,
        help_text="Alert a project's leads when its month-end forecast is over budget.",
    )
    spike_alerts = models.BooleanField(
        default=True, help_text="Alert a project's leads when a day's spend is a spike."
    )
    spike_multiple = models.DecimalField(
        max_digits=6,
        decimal_places=2,
        default=Decimal("2"),
        validators=[MinValueValidator(Decimal("1"))],
        help_text="A day's spend above this multiple of the mean of the days before is a spike.",
    )
    spike_days = models.PositiveSmallIntegerField(
        default=28,
        validators=[MinValueValidator(1), MaxValueValidator(365)],
        help_text="How many days before the day its mean is taken over.",
    )

    class Meta:
        verbose_name = "digest settings"
        verbose_name_plural = "digest settings"

    def __str__(self) -> str:
        return "Digest settings"

    @classmethod
    def get(cls) -> "DigestSettings":
        row = cls.objects.order_by("pk").first()
        return row or cls.objects.create()


class Subscription(models.Model):
    """One per person. Team leads get one (weekly, all their projects) the first time the
    digests run; turning it off is an opt-out that stays (the row is kept, `active` false)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="digest_subscription"
    )
    active = models.BooleanField(default=True)
    frequency = models.CharField(max_length=10, choices=Frequency.choices, default=Frequency.WEEKLY)
    projects = models.ManyToManyField(
        "projects.Project",
        blank=True,
        related_name="+",
        help_text="None chosen: every project the person can see.",
    )
    minimum_amount = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(0)],
        help_text="Findings that wasted less than this (organisation currency) are left out.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["active", "frequency"], name="subscription_due_idx")]

    def __str__(self) -> str:
        return f"{self.user} ({self.frequency}{'' if self.active else ', off'})"


class Delivery(models.Model):
    """One digest to one person for one period `[period_start, period_end)`.

    The row is the claim: it is inserted (unique per recipient and period) or taken over with a
    conditional UPDATE before the mail is sent, and marked after. `unknown` is a send whose
    outcome nobody knows (the connection dropped after the server may have accepted the mail): it
    is never retried by itself; the admin shows it and a person decides.
    """

    class Status(models.TextChoices):
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        NOTHING_TO_REPORT = "nothing_to_report", "Nothing to report"
        FAILED = "failed", "Failed (not sent)"
        UNKNOWN = "unknown", "Unknown (may have been sent)"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="digest_deliveries"
    )
    email = models.EmailField()
    frequency = models.CharField(max_length=10, choices=Frequency.choices)
    period_start = models.DateField()
    period_end = models.DateField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.SENDING)
    attempts = models.PositiveSmallIntegerField(default=1)
    # A refusal that another try cannot fix (the server refused the address for good).
    permanent = models.BooleanField(default=False)
    findings = models.PositiveIntegerField(default=0)
    wasted = models.JSONField(default=dict, blank=True, help_text="Currency → decimal string.")
    message_id = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    claimed_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-period_end", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "period_start", "period_end"], name="delivery_one_per_period"
            )
        ]
        indexes = [models.Index(fields=["status", "period_end"], name="delivery_status_idx")]

    def __str__(self) -> str:
        return f"{self.email} {self.period_start}–{self.period_end} ({self.status})"


class Alert(models.Model):
    """Something that cannot wait for the digest, about one project: open from when it was first
    seen until it clears. At most one open alert per project and kind (a partial unique index),
    which is also what makes its email go out once."""

    class Kind(models.TextChoices):
        FORECAST_OVER_BUDGET = "forecast_over_budget", "Forecast over budget"
        DAILY_SPIKE = "daily_spike", "Daily spend spike"

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=30, choices=Kind.choices)
    currency = models.CharField(max_length=3)
    amount = models.DecimalField(**MONEY, help_text="The forecast, or the day's spend.")
    threshold = models.DecimalField(**MONEY, help_text="The budget, or the multiple of the mean.")
    day = models.DateField(help_text="The UTC day the figures are of.")
    message = models.CharField(max_length=500)
    opened_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    recipients = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "kind"],
                condition=Q(cleared_at__isnull=True),
                name="alert_one_open_per_project_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.project}: {self.get_kind_display()}"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None
