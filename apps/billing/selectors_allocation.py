"""Reads of the allocation page: aliases, rules, re-attribution runs, and what moved."""

from dataclasses import dataclass, field
from decimal import Decimal

from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.projects.models import AllocationRule, Project, TagKeyAlias

from .models import AttributionRun
from .services import RECENT_DAYS


@dataclass(frozen=True)
class OwnerShare:
    """Spend of one owner (or of nobody: unattributed) in one currency that changes hands."""

    project: Project | None
    experiment: Experiment | None
    deployment: Deployment | None
    currency: str
    amount: Decimal
    recent: Decimal
    lines: int

    @property
    def label(self) -> str:
        if self.project is None:
            return "Unattributed"
        if self.experiment is not None:
            return f"{self.project.name} · experiment {self.experiment.name}"
        if self.deployment is not None:
            return f"{self.project.name} · deployment {self.deployment.name}"
        return self.project.name


@dataclass(frozen=True)
class Movement:
    """What a change of aliases or rules moves (a preview), or moved (a finished run)."""

    lines: int
    sources: list[OwnerShare]  # whom the spend is taken from, by its owner today
    targets: list[OwnerShare]  # whom it goes to
    totals: dict[str, Decimal] = field(default_factory=dict)  # per currency, all history
    recent_totals: dict[str, Decimal] = field(default_factory=dict)  # the last RECENT_DAYS
    seconds: float | None = None
    recent_days: int = RECENT_DAYS
    too_many_lines: int = 0  # a preview not computed: the change reaches this many lines

    @property
    def is_empty(self) -> bool:
        return not self.sources and not self.targets and not self.too_many_lines


def movement_from_rows(rows: list[dict], *, lines: int, seconds: float | None = None) -> Movement:
    """A Movement from the rows a run stores in `moved` (services.Moves.as_json)."""
    projects = Project.objects.in_bulk({r["project_id"] for r in rows if r["project_id"]})
    experiments = Experiment.objects.in_bulk(
        {r["experiment_id"] for r in rows if r["experiment_id"]}
    )
    deployments = Deployment.objects.in_bulk(
        {r["deployment_id"] for r in rows if r["deployment_id"]}
    )
    sources, targets = [], []
    totals: dict[str, Decimal] = {}
    recent: dict[str, Decimal] = {}
    for row in rows:
        share = OwnerShare(
            project=projects.get(row["project_id"]),
            experiment=experiments.get(row["experiment_id"]),
            deployment=deployments.get(row["deployment_id"]),
            currency=row["currency"],
            amount=Decimal(row["amount"]),
            recent=Decimal(row["recent"]),
            lines=row["lines"],
        )
        if row["direction"] == "from":
            sources.append(share)
            totals[share.currency] = totals.get(share.currency, Decimal(0)) + share.amount
            recent[share.currency] = recent.get(share.currency, Decimal(0)) + share.recent
        else:
            targets.append(share)
    order = lambda share: (share.currency, -share.amount, share.label)  # noqa: E731
    return Movement(
        lines=lines,
        sources=sorted(sources, key=order),
        targets=sorted(targets, key=order),
        totals=dict(sorted(totals.items())),
        recent_totals=dict(sorted(recent.items())),
        seconds=seconds,
    )


def attribution_run_movement(*, run: AttributionRun) -> Movement:
    return movement_from_rows(run.moved, lines=run.lines_changed)


def tag_key_aliases() -> list[TagKeyAlias]:
    return list(TagKeyAlias.objects.order_by("dimension", "key"))


def allocation_rules() -> list[AllocationRule]:
    return list(
        AllocationRule.objects.select_related(
            "project", "experiment", "deployment", "created_by"
        ).order_by("priority", "pk")
    )


def attribution_runs(*, limit: int = 5) -> list[AttributionRun]:
    return list(AttributionRun.objects.select_related("created_by").order_by("-pk")[:limit])
