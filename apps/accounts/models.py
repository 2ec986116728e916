import hashlib
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Organization(models.Model):
    """The one organisation of an installation, with its settings in one place."""

    name = models.CharField(max_length=200, default="My organisation")
    currency = models.CharField(max_length=3, default="USD", help_text="ISO 4217 code.")
    time_zone = models.CharField(max_length=64, default="UTC")
    idle_threshold_percent = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal("10"),
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="A GPU sample under this utilisation counts as idle.",
    )
    engineering_hourly_rate = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        default=Decimal("100"),
        help_text="Cost of an engineer's hour, in the organisation's currency (build or call).",
    )
    engineering_hours_per_month = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=Decimal("20"),
        validators=[MinValueValidator(0)],
        help_text="Engineering hours a month that running a self-hosted model takes, unless its "
        "build-or-call page says otherwise.",
    )

    class Meta:
        verbose_name = "organisation"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def get(cls) -> "Organization":
        """The single row, created with defaults the first time it is asked for."""
        org = cls.objects.order_by("pk").first()
        return org or cls.objects.create()


class Team(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=120, unique=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        LEAD = "lead", "Lead"
        MEMBER = "member", "Member"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> "ApiTokenQuerySet":
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A secret a training script or serving stack sends as `Authorization: Bearer <token>`.

    Only the SHA-256 of the secret is stored: the secret is 256 random bits, so a slow, salted
    password hash would add cost to every API call and no safety. The first characters are kept in
    clear so that a person can tell their tokens apart.
    """

    SCHEME = "cs_"
    PREFIX_LENGTH = 10  # "cs_" and the first seven characters of the random part

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What uses it, e.g. “training cluster”.")
    prefix = models.CharField(max_length=PREFIX_LENGTH)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @staticmethod
    def hash_secret(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()
