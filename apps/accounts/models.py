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
