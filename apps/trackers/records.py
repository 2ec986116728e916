"""A tracker run as costsite reads it, whichever tracker it came from."""

from dataclasses import dataclass, field
from datetime import datetime

from apps.experiments.models import Experiment

# Tracker statuses mapped to costsite's: a killed run was stopped by someone; W&B's crashed
# run failed as much as a failed one did.
MLFLOW_STATUSES = {
    "SCHEDULED": Experiment.Status.PLANNED,
    "RUNNING": Experiment.Status.RUNNING,
    "FINISHED": Experiment.Status.SUCCEEDED,
    "FAILED": Experiment.Status.FAILED,
    "KILLED": Experiment.Status.STOPPED,
}
WANDB_STATES = {
    "pending": Experiment.Status.PLANNED,
    "running": Experiment.Status.RUNNING,
    "finished": Experiment.Status.SUCCEEDED,
    "failed": Experiment.Status.FAILED,
    "crashed": Experiment.Status.FAILED,
    "killed": Experiment.Status.STOPPED,
    "preempted": Experiment.Status.STOPPED,
}
# A tracker's own statuses that may still change (polled again until they do not).
OPEN_STATUSES = frozenset({"SCHEDULED", "RUNNING", "pending", "running"})

# Parameters shown on the experiment page, as tags `param.<name>`: the first ones by name, so
# that a run logging hundreds of them keeps a readable page.
MAX_PARAMS = 30
MAX_TAG_VALUE = 500


@dataclass
class RunRecord:
    tracker: str
    run_id: str
    name: str
    tracker_status: str
    status: str
    tracker_experiment: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)  # what the run is tagged with
    params: dict[str, str] = field(default_factory=dict)
    # Where the project, resources and GPU count are looked up: tags and parameters (MLflow),
    # the config and metadata (W&B).
    lookup: dict[str, str] = field(default_factory=dict)
    # Metric histories by name, each (step, value, when measured); None when the tracker gave
    # none. The import keeps the configured loss metric's.
    history: dict[str, list[tuple[int, float, datetime | None]]] | None = None

    @property
    def is_finished(self) -> bool:
        return self.tracker_status not in OPEN_STATUSES

    def experiment_tags(self) -> dict[str, str]:
        tags = {key: value[:MAX_TAG_VALUE] for key, value in self.tags.items()}
        for key in sorted(self.params)[:MAX_PARAMS]:
            tags[f"param.{key}"] = self.params[key][:MAX_TAG_VALUE]
        return tags
