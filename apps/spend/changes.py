"""Who drives the spend: changes against the period before, movers and Pareto."""

from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    Case,
    F,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)

from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project

from .figures import cached
from .filters import Period
from .rollup import (
    MONEY,
    PARETO_SHARE,
    ZERO,
    SpendScope,
    rollup_query,
)


@dataclass(frozen=True)
class Change:
    """One project, experiment or deployment's spend in a period and in the one before."""

    kind: str
    pk: int
    name: str
    current: Decimal
    previous: Decimal
    parent: str = ""  # a project's team, an experiment's project, a deployment's model
    slug: str = ""  # a project's

    @property
    def change(self) -> Decimal:
        return self.current - self.previous

    @property
    def change_share(self) -> Decimal | None:
        return self.change / self.previous if self.previous else None


def _current_and_previous(period: Period) -> dict:
    current = Case(When(day__gte=period.start, then=F("effective_cost")), default=Value(ZERO))
    previous = Case(When(day__lt=period.start, then=F("effective_cost")), default=Value(ZERO))
    return {
        "current": Sum(current, output_field=MONEY),
        "previous": Sum(previous, output_field=MONEY),
    }


def movers(changes: list["Change"], *, limit: int | None = 10) -> list["Change"]:
    """The largest changes either way, largest first."""
    moved = [change for change in changes if change.change]
    moved.sort(key=lambda change: (-abs(change.change), change.name, change.pk))
    return moved[:limit]


@dataclass(frozen=True)
class SpendChanges:
    """Who drives the spend of a period and what changed against the period before: every
    project, experiment and deployment with spend in either (bounded by how many there are, not
    by the bill's size), and the models' spend in the period."""

    projects: list[Change]  # costliest now first
    experiments: list[Change]  # largest change first
    deployments: list[Change]
    models: "Pareto"

    def project_pareto(self) -> "Pareto":
        return pareto(
            noun="projects",
            amounts=[(c.pk, c.name, c.current, c.parent, c.slug) for c in self.projects],
        )

    def project_movers(self, limit: int | None) -> list[Change]:
        return movers(self.projects, limit=limit)

    def experiment_movers(self, limit: int) -> list[Change]:
        return movers(self.experiments, limit=limit)

    def deployment_movers(self, limit: int) -> list[Change]:
        return movers(self.deployments, limit=limit)


def spend_changes(
    *, scope: SpendScope, period: Period, names_for: int | None = 10, models: bool = True
) -> SpendChanges:
    """One grouped pass over the period and the one before it, by project and owner, summed per
    project, owner and model in the same statement; names are looked up after, for what a page
    shows.

    (Four queries, one per table of the overview, cost 3.5 times as much on the benchmark's
    year: each scanned the rollup and joined runs, deployments, models and projects.)
    `names_for` is how many of the largest changes get a name (None: all, for the CSV);
    without `models` the models' spend is left empty (a project page shows none).
    """
    previous = period.previous
    sums = (
        _current_and_previous(period)
        if previous
        else {
            "current": Sum("effective_cost"),
            "previous": Value(ZERO, output_field=MONEY),
        }
    )
    query = rollup_query(
        scope.q() & Q(billing_currency=scope.currency),
        Period(previous.start, period.end) if previous else period,
        lambda rows: (
            rows.values("project_id", "experiment_id", "deployment_id").annotate(**sums).order_by()
        ),
        cuts=(period.start,) if previous else (),
    )
    if query is None:
        return _changes([], names_for=names_for)

    def compute() -> SpendChanges:
        return _changes(_owner_sums(query, limit=names_for, models=models), names_for=names_for)

    # Cached whole, names included (a rename moves the data version as a change of spend does):
    # a warm page then looks up no name and adds up no row.
    return cached(f"spend-changes:{names_for}:{models}", query, compute)


def _owner_sums(query: QuerySet, *, limit: int | None, models: bool) -> list[tuple]:
    """`query`'s rows (by project, run and deployment, a key in each part of its UNION ALL)
    summed by the database, as (kind, pk, current, previous): every project's; the `limit`
    runs and the `limit` deployments whose spend changed most (all that changed, with None),
    ranked as _named_changes ranks them; and with `models`, each model's spend in the period
    (`previous` None), that of its runs and deployments with spend, joined to their models
    after the grouping (to the groups, not to every rollup row).

    Adding up the few thousand groups in Python, by project, run, deployment and model, took a
    tenth of a cold 12-month overview; this returns a few hundred rows. Amounts come back as
    the ORM gives them (its converters: SQLite's decimals)."""
    compiler = query.query.get_compiler(using=query.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # a filter that matches nothing (someone who sees no project)
        return []
    quote = connection.ops.quote_name
    current, previous = quote("current"), quote("previous")
    ranked = "" if limit is None else f" LIMIT {int(limit)}"

    def moved(owner: str) -> str:
        key = quote(f"{owner}_id")
        return (
            f"SELECT * FROM (SELECT '{owner}', {key}, SUM({current}), SUM({previous}) "
            f"FROM grouped WHERE {key} IS NOT NULL GROUP BY {key} "
            f"HAVING SUM({current}) <> SUM({previous}) "
            f"ORDER BY ABS(SUM({current}) - SUM({previous})) DESC, {key}{ranked}) AS {owner}s"
        )

    def owned(owner: str, table: str) -> str:
        key = quote(f"{owner}_id")
        return (
            f"SELECT owners.model_id, SUM(grouped.{current}) AS amount FROM grouped "
            f"JOIN {quote(table)} owners ON owners.id = grouped.{key} "
            f"WHERE owners.model_id IS NOT NULL GROUP BY grouped.{key}, owners.model_id "
            f"HAVING SUM(grouped.{current}) <> 0"
        )

    project = quote("project_id")
    parts = [
        f"SELECT 'project', {project}, SUM({current}), SUM({previous}) FROM grouped "
        f"WHERE {project} IS NOT NULL GROUP BY {project}",
        moved("experiment"),
        moved("deployment"),
    ]
    if models:
        parts.append(
            "SELECT 'model', model_id, SUM(amount), NULL FROM ("
            f"{owned('experiment', Experiment._meta.db_table)} UNION ALL "
            f"{owned('deployment', Deployment._meta.db_table)}) AS owned GROUP BY model_id"
        )
    with connection.cursor() as cursor:
        cursor.execute(f"WITH grouped AS ({sql}) {' UNION ALL '.join(parts)}", params)
        rows = cursor.fetchall()
    inner = query.query
    names = [*inner.extra_select, *inner.values_select, *inner.annotation_select]
    expressions = [expression for expression, *_ in compiler.select]
    money = compiler.get_converters([expressions[names.index("current")]]).get(0)
    if money is None:
        return rows
    converters, expression = money

    def converted(value):
        for converter in converters:
            value = converter(value, expression, connection)
        return value

    return [(kind, pk, converted(now), converted(before)) for kind, pk, now, before in rows]


def _changes(sums: list[tuple], *, names_for: int | None) -> SpendChanges:
    by_project: dict[int, tuple[Decimal, Decimal]] = {}
    moved: dict[str, list[tuple[int, Decimal, Decimal]]] = {"experiment": [], "deployment": []}
    by_model: dict[int, Decimal] = {}
    for kind, pk, current, before in sums:
        if kind == "project":
            by_project[pk] = (current, before)
        elif kind == "model":
            by_model[pk] = current
        else:
            moved[kind].append((pk, current, before))
    projects = {
        project["pk"]: project
        for project in Project.objects.filter(pk__in=list(by_project)).values(
            "pk", "name", "slug", "team__name"
        )
    }
    project_changes = [
        Change(
            kind="project",
            pk=pk,
            name=projects[pk]["name"],
            current=current,
            previous=before,
            parent=projects[pk]["team__name"],
            slug=projects[pk]["slug"],
        )
        for pk, (current, before) in by_project.items()
        if pk in projects
    ]
    project_changes.sort(key=lambda change: (-change.current, change.name))
    models = {
        model["pk"]: model
        for model in Model.objects.filter(pk__in=list(by_model)).values(
            "pk", "name", "project__name"
        )
    }
    return SpendChanges(
        projects=project_changes,
        experiments=_named_changes(
            "experiment", moved["experiment"], Experiment.objects, "project__name", names_for
        ),
        deployments=_named_changes(
            "deployment", moved["deployment"], Deployment.objects, "model__name", names_for
        ),
        models=pareto(
            noun="models",
            amounts=[
                (pk, models[pk]["name"], amount, models[pk]["project__name"])
                for pk, amount in by_model.items()
                if pk in models
            ],
        ),
    )


def _named_changes(
    kind: str, moved: list[tuple[int, Decimal, Decimal]], objects, parent: str, limit: int | None
) -> list[Change]:
    """The largest changes of one kind (all with `limit` None), with their names."""
    ranked = sorted(moved, key=lambda item: (-abs(item[1] - item[2]), item[0]))
    if limit is not None:
        ranked = ranked[:limit]
    names = {
        row["pk"]: row
        for row in objects.filter(pk__in=[pk for pk, *_ in ranked]).values("pk", "name", parent)
    }
    changes = [
        Change(
            kind=kind,
            pk=pk,
            name=names[pk]["name"],
            current=current,
            previous=before,
            parent=names[pk][parent] or "",
        )
        for pk, current, before in ranked
        if pk in names
    ]
    return movers(changes, limit=len(changes))


@dataclass(frozen=True)
class ParetoItem:
    pk: int | None
    name: str
    amount: Decimal
    share: Decimal
    cumulative_share: Decimal
    parent: str = ""
    slug: str = ""


def _floor_percent(share: Decimal) -> int:
    return int((share * 100).to_integral_value(rounding="ROUND_FLOOR"))


@dataclass(frozen=True)
class Pareto:
    """Things by spend, costliest first, with each one's share and the running share."""

    noun: str  # plural: "projects"
    items: list[ParetoItem]
    total: Decimal

    @property
    def head(self) -> int:
        """How many of the costliest make up 80% of the spend."""
        for position, item in enumerate(self.items, start=1):
            if item.cumulative_share >= PARETO_SHARE:
                return position
        return len(self.items)

    @property
    def head_share(self) -> Decimal | None:
        return self.items[self.head - 1].cumulative_share if self.items else None

    @property
    def headline(self) -> str:
        if not self.items:
            return ""
        top = self.items[0]
        if len(self.items) == 1:
            return f"{top.name} is all of the spend"
        if self.head == len(self.items):
            # "3 of 3 are 100%" says nothing: when no few drive the spend, say what the largest is.
            return f"{top.name} is the largest, {_floor_percent(top.share)}% of the spend"
        share = _floor_percent(self.head_share)
        return f"{self.head} of {len(self.items)} {self.noun} are {share}% of the spend"


def pareto(*, noun: str, amounts: list[tuple]) -> Pareto:
    """(pk, name, amount, parent[, slug]) in, a Pareto out. Credits (a negative net) have no
    share."""
    positive = [item for item in amounts if item[2] > 0]
    positive.sort(key=lambda item: (-item[2], item[1]))
    total = sum((item[2] for item in positive), ZERO)
    items, running = [], ZERO
    for pk, name, amount, parent, *slug in positive:
        running += amount
        items.append(
            ParetoItem(
                pk=pk,
                name=name,
                amount=amount,
                share=amount / total,
                cumulative_share=running / total,
                parent=parent,
                slug=slug[0] if slug else "",
            )
        )
    return Pareto(noun=noun, items=items, total=total)


# -- Unattributed spend --------------------------------------------------------------------------
