from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.projects.models import ResourceUse


class Hardware(models.Model):
    """What a run or a deployment runs on. Shared by experiments and deployments."""

    instance_type = models.CharField(max_length=100, blank=True)
    gpu_type = models.CharField(max_length=100, blank=True, help_text="e.g. A100-80GB, H100, L4.")
    gpu_count = models.PositiveIntegerField(default=0)
    is_spot = models.BooleanField("spot / preemptible", default=False)
    region = models.CharField(max_length=100, blank=True)

    class Meta:
        abstract = True


class Experiment(Hardware):
    class Kind(models.TextChoices):
        TRAINING = "training", "Training"
        FINE_TUNING = "fine_tuning", "Fine-tuning"
        EVALUATION = "evaluation", "Evaluation"
        NOTEBOOK = "notebook", "Notebook"

    class Status(models.TextChoices):
        PLANNED = "planned", "Planned"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"

    project = models.ForeignKey(
        "projects.Project", on_delete=models.CASCADE, related_name="experiments"
    )
    name = models.CharField(max_length=200)
    external_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="The id a training script registers this run under (unique in the project).",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.TRAINING)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PLANNED)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    model = models.ForeignKey(
        "deployments.Model",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="experiments",
        help_text="The model this run produces.",
    )
    tags = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=~Q(external_id=""),
                name="experiment_unique_external_id",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True)
                | Q(started_at__isnull=True)
                | Q(ended_at__gte=models.F("started_at")),
                name="experiment_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    def next_statuses(self) -> list[str]:
        """The statuses a script may move this run to (a person on the edit page may set any)."""
        return [status for status in self.Status.values if status in TRANSITIONS[self.status]]

    @property
    def workload(self) -> str:
        """The workload this run's spend counts as (DESIGN.md)."""
        return {
            self.Kind.FINE_TUNING: "fine_tuning",
            self.Kind.NOTEBOOK: "development",
        }.get(self.kind, "training")


class ExperimentResource(ResourceUse):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="resources")

    class Meta(ResourceUse.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "resource_id", "started_at"],
                name="experimentresource_unique",
            )
        ]


# How a registered run's status may move when a script reports it. Succeeded and failed are final:
# a retry is a new run with its own external id, so a failed run's cost stays counted as waste.
# Stopped may resume, as a preempted spot run restarts from its checkpoint.
TRANSITIONS: dict[str, frozenset[str]] = {
    Experiment.Status.PLANNED: frozenset(
        {
            Experiment.Status.RUNNING,
            Experiment.Status.SUCCEEDED,
            Experiment.Status.FAILED,
            Experiment.Status.STOPPED,
        }
    ),
    Experiment.Status.RUNNING: frozenset(
        {Experiment.Status.SUCCEEDED, Experiment.Status.FAILED, Experiment.Status.STOPPED}
    ),
    Experiment.Status.STOPPED: frozenset({Experiment.Status.RUNNING}),
    Experiment.Status.SUCCEEDED: frozenset(),
    Experiment.Status.FAILED: frozenset(),
}
FINISHED_STATUSES = frozenset(
    {Experiment.Status.SUCCEEDED, Experiment.Status.FAILED, Experiment.Status.STOPPED}
)


class MetricPoint(models.Model):
    """One value of one metric of a run at one training step (the loss at step 1200).

    A step sent again overwrites its value: a script that retries a batch never duplicates it.
    """

    experiment = models.ForeignKey(
        Experiment, on_delete=models.CASCADE, related_name="metric_points"
    )
    name = models.CharField(max_length=100)
    step = models.PositiveBigIntegerField()
    value = models.FloatField()
    recorded_at = models.DateTimeField(
        null=True, blank=True, help_text="When the script measured it, if it said."
    )

    class Meta:
        ordering = ["experiment", "name", "step"]
        constraints = [
            # Also the index of the experiment page's query: one run's series in step order.
            models.UniqueConstraint(
                fields=["experiment", "name", "step"], name="metricpoint_unique_step"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.step}={self.value}"
