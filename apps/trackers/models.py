"""Experiment trackers: the MLflow servers costsite polls, and which tracker run is which
costsite experiment."""

from django.db import models

from apps.gpu.models import validate_http_url
from costsite.polling import PolledSource

DEFAULT_RESOURCE_TAGS = "costsite.resource_id, instance_id, cluster_id, host"


class TrackerSource(PolledSource):
    """An MLflow tracking server polled through its REST API.

    MLflow runs carry no update time, so a poll reads the runs started since the last poll
    (`polled_from`, a few minutes of overlap for clocks) and every run that was not finished at
    the last poll; a full re-read reads every run."""

    INTERVAL_FIELD = "interval_minutes"
    INTERVAL_UNIT_SECONDS = 60

    name = models.CharField(max_length=200, unique=True)
    # Not a URLField: single-label hosts (http://mlflow:5000) are what compose and Kubernetes use.
    url = models.CharField(
        "URL",
        max_length=500,
        validators=[validate_http_url],
        help_text="The tracking server's base URL, e.g. http://mlflow:5000.",
    )
    token = models.CharField(
        max_length=500, blank=True, help_text="Sent as a bearer token; empty for none."
    )
    project_tag = models.CharField(
        max_length=200,
        default="project",
        help_text="The run tag naming the costsite project (the project aliases count too). "
        "Without it: the MLflow experiment's name, then the default project.",
    )
    default_project = models.ForeignKey(
        "projects.Project",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="For runs neither a tag nor the experiment name places; empty: skip them.",
    )
    resource_tags = models.CharField(
        max_length=500,
        default=DEFAULT_RESOURCE_TAGS,
        help_text="Run tags (comma-separated) naming what the run ran on: a billed resource id, "
        "or a host name, mapped through the GPU host mappings.",
    )
    gpu_count_tag = models.CharField(
        max_length=200,
        default="gpu_count",
        help_text="The tag or parameter giving the run's GPU count (splits a shared resource).",
    )
    loss_metric = models.CharField(
        max_length=200, default="loss", help_text="The metric whose history is imported."
    )
    allow_writes = models.BooleanField(
        "write costs back",
        default=False,
        help_text="Tag each run with costsite.cost, costsite.currency and costsite.url.",
    )
    site_url = models.CharField(
        "costsite's URL",
        max_length=500,
        blank=True,
        validators=[validate_http_url],
        help_text="Where people reach costsite (for the costsite.url tag), e.g. "
        "https://costsite.example.com.",
    )
    interval_minutes = models.PositiveIntegerField(default=5, help_text="How often to poll.")
    polled_from = models.DateTimeField(
        null=True, blank=True, help_text="When the last successful poll started."
    )
    last_runs = models.PositiveIntegerField(
        default=0, help_text="Runs the last successful poll read."
    )
    last_unassigned = models.PositiveIntegerField(
        default=0, help_text="Runs of the last poll that no project took."
    )

    class Meta:
        ordering = ["name"]
        # The dispatcher's query: sources due now.
        indexes = [models.Index(fields=["is_paused", "next_poll_at"], name="trackersource_due_idx")]

    def __str__(self) -> str:
        return self.name

    @property
    def resource_tag_keys(self) -> list[str]:
        return [key.strip() for key in self.resource_tags.split(",") if key.strip()]


class TrackedRun(models.Model):
    """One tracker run and the costsite experiment it became: the key that makes an import
    idempotent by the tracker's run id."""

    class Tracker(models.TextChoices):
        MLFLOW = "mlflow", "MLflow"
        WANDB = "wandb", "Weights & Biases"

    tracker = models.CharField(max_length=20, choices=Tracker.choices)
    run_id = models.CharField(max_length=200)
    source = models.ForeignKey(
        TrackerSource, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    experiment = models.OneToOneField(
        "experiments.Experiment", on_delete=models.CASCADE, related_name="tracked_run"
    )
    tracker_experiment = models.CharField(
        max_length=500, blank=True, help_text="The MLflow experiment or the W&B project."
    )
    tracker_status = models.CharField(max_length=20)
    is_finished = models.BooleanField(default=False)
    cost_written = models.CharField(
        max_length=50, blank=True, help_text="The costsite.cost tag last written to the run."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tracker", "run_id"]
        constraints = [
            models.UniqueConstraint(fields=["tracker", "run_id"], name="trackedrun_unique_run")
        ]
        # A poll's query: the source's runs not finished at the last poll.
        indexes = [models.Index(fields=["source", "is_finished"], name="trackedrun_open_idx")]

    def __str__(self) -> str:
        return f"{self.get_tracker_display()} run {self.run_id}"
