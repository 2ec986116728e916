from django.db import models
from django.db.models import Q

from apps.experiments.models import Hardware
from apps.projects.models import ResourceUse


class Model(models.Model):
    """A model: experiments produce it, deployments serve it."""

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="models")
    name = models.CharField(max_length=200)
    external_id = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="model_unique_name"),
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=~Q(external_id=""),
                name="model_unique_external_id",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Deployment(Hardware):
    class ServingPattern(models.TextChoices):
        REALTIME = "realtime", "Real-time"
        BATCH = "batch", "Batch"

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="deployments")
    project = models.ForeignKey(
        "projects.Project", on_delete=models.CASCADE, related_name="deployments"
    )
    name = models.CharField(max_length=200)
    external_id = models.CharField(max_length=200, blank=True)
    serving_pattern = models.CharField(
        max_length=20, choices=ServingPattern.choices, default=ServingPattern.REALTIME
    )
    replicas = models.PositiveIntegerField(default=1)
    latency_objective_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="p95 latency objective in milliseconds."
    )
    cold_start_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a replica takes from zero to its first answer (model load included). "
        "Empty: unknown, so scaling to zero is never suggested.",
    )
    data_residency = models.BooleanField(
        default=False, help_text="Data may not leave our own infrastructure."
    )
    is_fine_tuned = models.BooleanField("fine-tuned model", default=False)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=~Q(external_id=""),
                name="deployment_unique_external_id",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class DeploymentResource(ResourceUse):
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="resources")

    class Meta(ResourceUse.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["deployment", "resource_id", "started_at"],
                name="deploymentresource_unique",
            )
        ]


class TrafficHour(models.Model):
    """What one deployment served in one UTC hour, as its serving stack reports it.

    One row per deployment and hour: an hour reported again replaces the earlier figures.
    """

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="traffic")
    hour = models.DateTimeField(help_text="The start of the UTC hour.")
    requests = models.PositiveBigIntegerField()
    duplicate_requests = models.PositiveBigIntegerField(
        default=0, help_text="Requests identical to an earlier one: what a cache would have saved."
    )
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    latency_p50_ms = models.FloatField(null=True, blank=True)
    latency_p95_ms = models.FloatField(null=True, blank=True)
    latency_p99_ms = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["deployment", "hour"]
        constraints = [
            # Also the index of the deployment page's query: one deployment's hours in order.
            models.UniqueConstraint(fields=["deployment", "hour"], name="traffichour_unique_hour"),
            models.CheckConstraint(
                condition=Q(duplicate_requests__lte=models.F("requests")),
                name="traffichour_duplicates_within_requests",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment} {self.hour:%Y-%m-%d %H}:00"
