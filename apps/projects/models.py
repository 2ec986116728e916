from collections import Counter
from collections.abc import Iterable

from django.conf import settings
from django.db import models
from django.db.models import Case, CharField, F, Func, Value, When
from django.db.models.functions import Left, Reverse, StrIndex
from django.db.models.lookups import GreaterThan


class Workload(models.TextChoices):
    """What spend is for (DESIGN.md). Each has one colour everywhere (apps.projects.colours)."""

    TRAINING = "training", "Training"
    FINE_TUNING = "fine_tuning", "Fine-tuning"
    INFERENCE = "inference", "Inference"
    DEVELOPMENT = "development", "Development"
    STORAGE = "storage", "Storage"
    NETWORK = "network", "Network"
    OTHER = "other", "Other"
    UNATTRIBUTED = "unattributed", "Unattributed"


# The workloads a project's runs and deployments have, in the order that breaks a tie.
RUN_WORKLOADS = (Workload.TRAINING, Workload.FINE_TUNING, Workload.INFERENCE, Workload.DEVELOPMENT)


def usual_workload(workloads: Iterable[str]) -> str | None:
    """A project's usual workload: the one most of its registered experiments and deployments
    have (`workloads`: one per registration), ties going to the first of RUN_WORKLOADS; None
    without any. GPU compute a rule gives the project without saying what for counts as it.

    Registrations, not spend: they exist before any bill and do not move with the
    re-attribution that this choice itself drives.
    """
    counts = Counter(workloads)
    best = max(RUN_WORKLOADS, key=lambda w: (counts[w.value], -RUN_WORKLOADS.index(w)))
    return best.value if counts[best.value] else None


class ProjectQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ProjectQuerySet":
        if user.is_staff:
            return self
        return self.filter(team__memberships__user=user)

    def editable_by(self, user) -> "ProjectQuerySet":
        if user.is_staff:
            return self
        return self.filter(team__memberships__user=user, team__memberships__role="lead")


class Project(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=200)
    slug = models.SlugField(
        max_length=100, unique=True, help_text="Also the value of the project tag on resources."
    )
    description = models.TextField(blank=True)
    monthly_budget = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="In the organisation's currency; leave empty for no budget.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TagKeyAlias(models.Model):
    """A tag key that names a project, experiment or deployment (e.g. `ml-project`, `user:project`),
    or a stored object's data class or model (billing.storage reads those two).

    Keys are compared without case and surrounding spaces, as real exports vary in both.
    """

    class Dimension(models.TextChoices):
        PROJECT = "project", "Project"
        EXPERIMENT = "experiment", "Experiment"
        DEPLOYMENT = "deployment", "Deployment"
        DATA_CLASS = "data_class", "Data class"
        MODEL = "model", "Model"

    dimension = models.CharField(max_length=20, choices=Dimension.choices)
    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dimension", "key"]
        verbose_name_plural = "tag key aliases"
        constraints = [
            models.UniqueConstraint(fields=["dimension", "key"], name="tagkeyalias_unique_key")
        ]

    def __str__(self) -> str:
        return f"{self.key} → {self.dimension}"


class AllocationRule(models.Model):
    """Claims spend that tags and registered resources did not reach, by a pattern on one field.

    Patterns are shell-style (`*` and `?`), matched without case. Lower priority numbers win.
    """

    class Field(models.TextChoices):
        BILLING_ACCOUNT = "billing_account_id", "Billing account"
        SUB_ACCOUNT = "sub_account_id", "Sub-account"
        SERVICE = "service_name", "Service"
        RESOURCE = "resource_id", "Resource id"

    name = models.CharField(max_length=200)
    field = models.CharField(max_length=40, choices=Field.choices)
    pattern = models.CharField(max_length=500)
    priority = models.PositiveIntegerField(default=100)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="allocation_rules")
    experiment = models.ForeignKey(
        "experiments.Experiment",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="allocation_rules",
    )
    deployment = models.ForeignKey(
        "deployments.Deployment",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="allocation_rules",
    )
    workload = models.CharField(
        max_length=20,
        choices=Workload.choices,
        blank=True,
        help_text="Leave empty to derive it from the owner and the service.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["priority", "pk"]

    def __str__(self) -> str:
        return f"{self.name}: {self.field} ~ {self.pattern}"


def tail_of(resource_id: str) -> str:
    """A resource id after its last `/`, trailing slashes left out first:
    `arn:aws:ec2:...:instance/i-0abc` and `i-0abc` name the same instance, and a GPU's host is
    the tail. resource_tail() is the same in SQL."""
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def resource_tail() -> Case:
    """tail_of(resource_id) in SQL, which ResourceUse.tail stores (both databases; a test holds
    the two equal)."""
    trimmed = Func(F("resource_id"), Value("/"), function="RTRIM", output_field=CharField())
    backwards = Reverse(trimmed)
    slash = StrIndex(backwards, Value("/"))
    return Case(
        When(GreaterThan(slash, 0), then=Reverse(Left(backwards, slash - 1))),
        default=trimmed,
    )


class ResourceUse(models.Model):
    """A cloud resource id a run or a deployment used, and when.

    Without a window of its own, the owner's start and end apply.
    """

    resource_id = models.CharField(max_length=1000, db_index=True)
    # Written by the database with the id: a GPU is found by its host, the id's tail, through
    # this column's index. Worked out in each query instead, the tail of every registration
    # was computed again (2,000 of them: 4-6 ms a query, and the planner, which does not know
    # the cost, chose to scan them for a page of fifty hosts).
    tail = models.GeneratedField(
        expression=resource_tail(),
        output_field=models.CharField(max_length=1000),
        db_persist=True,
    )
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["resource_id"]
        indexes = [models.Index(fields=["tail"], name="%(class)s_tail")]

    def __str__(self) -> str:
        return self.resource_id
