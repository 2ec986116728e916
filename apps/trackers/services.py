"""Tracker runs become costsite experiments: the one mapping (project, resources, GPUs, loss)
that MLflow polls and W&B imports share, the MLflow poll, and the costs written back."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fnmatch import fnmatchcase

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Organization
from apps.billing.attribution import alias_key
from apps.experiments.models import Experiment
from apps.experiments.services import (
    MetricValues,
    experiment_create,
    experiment_metrics_record,
    experiment_update,
)
from apps.gpu.models import HostMapping
from apps.projects.models import AllocationRule, Project, TagKeyAlias
from costsite.polling import polled_source_failed, polled_source_succeeded, polled_sources_claim_due

from .mlflow import MlflowClient, TrackerError, run_id_filters
from .models import TrackedRun, TrackerSource
from .records import MLFLOW_STATUSES, RunRecord
from .selectors import run_cost
from .wandb import read_runs

# A poll reads the runs started since the last poll began, less this much: a tracker's clock a
# little behind costsite's must not hide a run.
CLOCK_OVERLAP = timedelta(minutes=5)
CENT = Decimal("0.01")


@dataclass(frozen=True)
class RunMapping:
    """How runs find their project, resources and GPU count."""

    project_tag: str = "project"
    default_project: Project | None = None
    resource_tags: tuple[str, ...] = ()
    gpu_count_tag: str = "gpu_count"
    loss_metric: str = "loss"

    @classmethod
    def of(cls, source: TrackerSource) -> "RunMapping":
        return cls(
            project_tag=source.project_tag,
            default_project=source.default_project,
            resource_tags=tuple(source.resource_tag_keys),
            gpu_count_tag=source.gpu_count_tag,
            loss_metric=source.loss_metric,
        )


class _Context:
    """What every run of one import looks up: projects by slug and name, the project tag keys,
    the host mappings. Loaded once per import."""

    def __init__(self, mapping: RunMapping) -> None:
        self.mapping = mapping
        self.projects: dict[str, Project] = {}
        for project in Project.objects.all():
            self.projects.setdefault(project.name.casefold(), project)
        for project in Project.objects.all():
            self.projects[project.slug.casefold()] = project  # a slug beats a name
        self.project_keys = {alias_key(mapping.project_tag), "project"} | {
            alias_key(key)
            for key in TagKeyAlias.objects.filter(
                dimension=TagKeyAlias.Dimension.PROJECT
            ).values_list("key", flat=True)
        }
        self.hosts = {
            host.casefold(): resource_id
            for host, resource_id in HostMapping.objects.values_list("host", "resource_id")
        }
        # The organisation's rules on resource ids, as they claim the bill's lines: the lowest
        # priority number first, shell-style patterns matched without case.
        rules = AllocationRule.objects.filter(field=AllocationRule.Field.RESOURCE)
        self.rules = [
            (rule.pattern.casefold(), rule.project)
            for rule in rules.select_related("project").order_by("priority", "pk")
        ]

    def project(self, record: RunRecord) -> Project | None:
        for key, value in record.lookup.items():
            if alias_key(key) in self.project_keys and value.strip():
                found = self.projects.get(value.strip().casefold())
                if found:
                    return found
        if record.tracker_experiment:
            found = self.projects.get(record.tracker_experiment.strip().casefold())
            if found:
                return found
        resources = [resource.casefold() for resource in self.resource_ids(record)]
        for pattern, project in self.rules:
            if any(fnmatchcase(resource, pattern) for resource in resources):
                return project
        return self.mapping.default_project

    def resource_ids(self, record: RunRecord) -> list[str]:
        """The values of the resource tags, a host name replaced by the resource it maps to."""
        ids = []
        for key in self.mapping.resource_tags:
            value = record.lookup.get(key, "").strip()
            if value:
                ids.append(self.hosts.get(value.casefold(), value))
        return list(dict.fromkeys(ids))

    def gpu_count(self, record: RunRecord) -> int:
        value = record.lookup.get(self.mapping.gpu_count_tag, "").strip()
        try:
            return max(int(float(value)), 0) if value else 0
        except ValueError:
            return 0


@dataclass
class Tally:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    unassigned: int = 0

    @property
    def runs(self) -> int:
        return self.created + self.updated + self.unchanged + self.unassigned

    def add(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)


def _fields(record: RunRecord, context: _Context) -> dict:
    gpus = context.gpu_count(record)
    started, ended = record.started_at, record.ended_at
    if record.is_finished is False:
        ended = None
    if started and ended and ended < started:
        ended = started
    return {
        "name": (record.name or record.run_id)[:200],
        "status": record.status,
        "started_at": started,
        "ended_at": ended,
        "tags": record.experiment_tags(),
        "gpu_count": gpus,
        # The registration rules want a GPU type with a count; the tracker may not say one.
        "gpu_type": record.lookup.get("gpu_type", "")[:100] or ("GPU" if gpus else ""),
    }


def _run_upsert(*, record: RunRecord, context: _Context, source: TrackerSource | None) -> str:
    """Create or update the run's experiment: 'created', 'updated', 'unchanged' or
    'unassigned' (no project takes it; nothing written)."""
    tracked = (
        TrackedRun.objects.select_related("experiment")
        .filter(tracker=record.tracker, run_id=record.run_id)
        .first()
    )
    fields = _fields(record, context)
    resource_ids = context.resource_ids(record)
    if tracked is None:
        project = context.project(record)
        if project is None:
            return "unassigned"
        external_id = f"{record.tracker}-{record.run_id}"[:200]
        experiment = Experiment.objects.filter(project=project, external_id=external_id).first()
        if experiment is None:
            experiment = experiment_create(
                project=project, external_id=external_id, resource_ids=resource_ids, **fields
            )
        else:  # its tracked run was deleted: take the experiment back
            experiment = experiment_update(
                experiment=experiment, resource_ids=resource_ids, **fields
            )
        tracked = TrackedRun.objects.create(
            tracker=record.tracker,
            run_id=record.run_id,
            source=source,
            experiment=experiment,
            tracker_experiment=record.tracker_experiment[:500],
            tracker_status=record.tracker_status,
            is_finished=record.is_finished,
        )
        outcome = "created"
    else:
        experiment = tracked.experiment
        current_ids = sorted(experiment.resources.values_list("resource_id", flat=True))
        changed = {
            name: value for name, value in fields.items() if getattr(experiment, name) != value
        }
        if changed or current_ids != sorted(resource_ids):
            # Changed resource ids are announced (ownership port): their spend re-attributes.
            experiment_update(experiment=experiment, resource_ids=resource_ids, **changed)
            outcome = "updated"
        else:
            outcome = "unchanged"
        TrackedRun.objects.filter(pk=tracked.pk).update(
            tracker_status=record.tracker_status,
            is_finished=record.is_finished,
            tracker_experiment=record.tracker_experiment[:500],
            source=source or tracked.source,
            updated_at=timezone.now(),
        )
    loss = (record.history or {}).get(context.mapping.loss_metric)
    if loss:
        metric = context.mapping.loss_metric[:100]
        recorded = experiment_metrics_record(
            experiment=experiment,
            points=[
                MetricValues(step=step, values={metric: value}, recorded_at=at)
                for step, value, at in loss
            ],
        )
        if outcome == "unchanged" and recorded.created:
            outcome = "updated"
    return outcome


@transaction.atomic
def tracker_runs_import(
    *, records: list[RunRecord], mapping: RunMapping, source: TrackerSource | None = None
) -> Tally:
    """Create or update one experiment per run, idempotent by the tracker's run id; all or
    nothing."""
    context = _Context(mapping)
    tally = Tally()
    for record in records:
        tally.add(_run_upsert(record=record, context=context, source=source))
    return tally


def wandb_runs_import(
    *, name: str, data: bytes, mapping: RunMapping, file_format: str = "auto"
) -> Tally:
    """Import a W&B runs file (the UI's CSV export or the public API's runs JSON): every run or,
    on any fault, none (WandbFileError names the file, row and column)."""
    records = read_runs(name=name, data=data, file_format=file_format)
    return tracker_runs_import(records=records, mapping=mapping)


# -- MLflow --------------------------------------------------------------------------------------


def _moment(millis) -> datetime | None:
    if millis in (None, "", 0, "0"):
        return None
    return datetime.fromtimestamp(int(millis) / 1000, tz=UTC)


def mlflow_record(run: dict, *, experiment_names: dict[str, str]) -> RunRecord:
    """One run of runs/search as a RunRecord (without its loss history)."""
    info, data = run.get("info", {}), run.get("data", {})
    tags = {item["key"]: str(item.get("value", "")) for item in data.get("tags", [])}
    params = {item["key"]: str(item.get("value", "")) for item in data.get("params", [])}
    status = info.get("status", "RUNNING")
    return RunRecord(
        tracker=TrackedRun.Tracker.MLFLOW,
        run_id=info["run_id"],
        name=info.get("run_name") or tags.get("mlflow.runName", ""),
        tracker_status=status,
        status=MLFLOW_STATUSES.get(status, Experiment.Status.RUNNING),
        tracker_experiment=experiment_names.get(str(info.get("experiment_id")), ""),
        started_at=_moment(info.get("start_time")),
        ended_at=_moment(info.get("end_time")),
        # MLflow's own tags (mlflow.user, mlflow.source.*) are looked up, not shown.
        tags={key: value for key, value in tags.items() if not key.startswith("mlflow.")},
        params=params,
        lookup=params | tags,
    )


@dataclass(frozen=True)
class PollOutcome:
    tally: Tally
    costs_written: int


def tracker_source_create(**values) -> TrackerSource:
    return TrackerSource.objects.create(next_poll_at=timezone.now(), **values)


@transaction.atomic
def tracker_source_update(*, source: TrackerSource, **values) -> TrackerSource:
    for name, value in values.items():
        setattr(source, name, value)
    source.save()
    return source


@transaction.atomic
def tracker_source_pause(*, source: TrackerSource, paused: bool) -> TrackerSource:
    source.is_paused = paused
    if not paused:
        source.next_poll_at = timezone.now()  # resumed: poll at the next tick
    source.save(update_fields=["is_paused", "next_poll_at", "updated_at"])
    return source


def retry_delay(*, failures: int) -> int:
    """Seconds before polling a failing server again: 60 s, doubling, at most 30 minutes."""
    return min(60 * 2 ** max(failures - 1, 0), 1800)


def tracker_sources_claim_due(*, now: datetime | None = None) -> list[int]:
    return polled_sources_claim_due(model=TrackerSource, now=now)


def tracker_source_poll(
    *, source: TrackerSource, full: bool = False, now: datetime | None = None
) -> PollOutcome:
    """Read the server's new and unfinished runs (every run when `full`), import them, and write
    costs back when the source allows it. Raises TrackerError when the server is down or refuses:
    the source is then unhealthy, and as the poll's starting point does not move, the next poll
    reads what this one could not."""
    now = now or timezone.now()
    TrackerSource.objects.filter(pk=source.pk).update(last_attempt_at=now)
    try:
        client = MlflowClient(url=source.url, token=source.token)
        records = _mlflow_records(client=client, source=source, full=full)
        tally = tracker_runs_import(records=records, mapping=RunMapping.of(source), source=source)
        written = tracker_costs_write(source=source, client=client) if source.allow_writes else 0
    except TrackerError as exc:
        polled_source_failed(
            source=source,
            error=str(exc),
            now=now,
            retry_seconds=retry_delay(failures=source.consecutive_failures + 1),
        )
        raise
    polled_source_succeeded(
        source=source,
        now=now,
        reschedule=not full,
        polled_from=now,
        last_runs=tally.runs,
        last_unassigned=tally.unassigned,
    )
    return PollOutcome(tally=tally, costs_written=written)


def _mlflow_records(*, client: MlflowClient, source: TrackerSource, full: bool) -> list[RunRecord]:
    experiments = client.experiments()
    names = {str(item["experiment_id"]): item.get("name", "") for item in experiments}
    ids = list(names)
    filters = [""]
    if not full and source.polled_from:
        since = int((source.polled_from - CLOCK_OVERLAP).timestamp() * 1000)
        filters = [f"attributes.start_time >= {since}"]
        open_ids = list(
            TrackedRun.objects.filter(source=source, is_finished=False)
            .order_by("run_id")
            .values_list("run_id", flat=True)
        )
        filters += run_id_filters(open_ids)
    runs: dict[str, dict] = {}
    for filter_string in filters:
        for run in client.runs(experiment_ids=ids, filter_string=filter_string):
            runs[run["info"]["run_id"]] = run
    records = []
    for run in runs.values():
        record = mlflow_record(run, experiment_names=names)
        history = client.metric_history(run_id=record.run_id, key=source.loss_metric)
        if history:
            record.history = {
                source.loss_metric: [
                    (int(point.get("step", 0)), float(point["value"]), _moment(point["timestamp"]))
                    for point in history
                    if math.isfinite(float(point["value"]))
                ]
            }
        records.append(record)
    return records


def tracker_costs_write(*, source: TrackerSource, client: MlflowClient | None = None) -> int:
    """Tag each of the source's runs whose cost changed since the last write with
    costsite.cost, costsite.currency and costsite.url; returns the runs tagged."""
    client = client or MlflowClient(url=source.url, token=source.token)
    currency = Organization.get().currency
    written = 0
    for tracked in TrackedRun.objects.filter(source=source).select_related("experiment"):
        amount = run_cost(experiment=tracked.experiment, currency=currency)
        value = str(amount.quantize(CENT, ROUND_HALF_EVEN))
        if value == tracked.cost_written or (not tracked.cost_written and not amount):
            continue
        client.set_tag(run_id=tracked.run_id, key="costsite.cost", value=value)
        client.set_tag(run_id=tracked.run_id, key="costsite.currency", value=currency)
        if source.site_url:
            path = reverse("experiment_detail", args=[tracked.experiment_id])
            client.set_tag(
                run_id=tracked.run_id, key="costsite.url", value=source.site_url.rstrip("/") + path
            )
        TrackedRun.objects.filter(pk=tracked.pk).update(cost_written=value)
        written += 1
    return written
