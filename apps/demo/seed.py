"""The demo organisation: a made-up company's ML teams, projects, runs, models and deployments.

`seed_demo` builds the organisation here, then runs the data steps in `DEMO_DATA_STEPS`, which write
files (billing exports, GPU metrics) into a directory and load them through the real importers.

Everything is described by the catalogue (catalogue.py) and laid out with a fixed random seed, so
two runs create the same organisation; only the times move, because they are relative to now (the
last ~3 months). Each experiment family lists its runs as outcome letters, oldest first, so the
counts per status and kind can be read off the catalogue:

    S succeeded · F failed · X stopped · R running · P planned

Projects, runs, models and deployments are written through their apps' services, as a page or a
training script would write them; the organisation's settings, users and teams have no services
yet, so those go through the ORM.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Protocol

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Membership, Organization, Team
from apps.deployments.services import deployment_create, model_create
from apps.experiments.models import Experiment, ExperimentResource
from apps.experiments.services import experiment_create
from apps.insights.tasks import on_spend_data_changed as findings_recompute_later
from apps.projects.models import Project, TagKeyAlias
from apps.projects.ports import spend_data_changed
from apps.projects.services import project_create

from .activity import demo_activity_load
from .billing import demo_billing_load
from .build_or_call import demo_build_or_call_load
from .catalogue import (
    DURATION_HOURS,
    HARDWARE,
    OUTCOMES,
    PROJECTS,
    TAG_KEY_ALIASES,
    TEAMS,
    Family,
    Hardware,
    Kind,
    ProjectSpec,
    Status,
    TeamSpec,
)
from .findings import demo_part3_runs
from .gpu import demo_gpu_metrics_load
from .levers import demo_levers_load
from .model_api import demo_model_api_load
from .trackers import demo_tracker_runs_load

DEMO_ORGANIZATION_NAME = "Northwind Robotics"
DEMO_PASSWORD = "costsite-demo"  # noqa: S105 (printed on purpose: it is the demo's login)
DEMO_ADMIN_USERNAME = "admin"
DEMO_SEED = 20240917
# How far back the runs go: about one quarter, so a quarter-over-quarter view has data.
DEMO_HISTORY_DAYS = 88


@dataclass(frozen=True)
class Credential:
    role: str  # "staff", "lead" or "member"
    team: str  # the team's name; empty for staff
    username: str
    password: str


@dataclass
class DemoOrganization:
    organization: Organization
    created: bool
    credentials: list[Credential] = field(default_factory=list)


class DemoDataStep(Protocol):
    def __call__(self, *, directory: Path, small: bool, log: Callable[[str], None]) -> None: ...


# Steps that run once, right after the organisation is created: each writes its files into
# `directory` (a folder of its own under COSTSITE_DATA_DIR/demo) and loads them through the real
# importer, as an operator would. The tracker runs come first, so the bill bills their machines
# too; the bill before the GPU metrics, so the metrics join billed resources.
DEMO_DATA_STEPS: list[tuple[str, DemoDataStep]] = [
    ("tracker-runs", demo_tracker_runs_load),
    ("part3-runs", demo_part3_runs),
    ("billing", demo_billing_load),
    ("gpu-metrics", demo_gpu_metrics_load),
    ("traffic-and-metrics", demo_activity_load),
    # After the bill: the verdicts read the deployments' spend (traffic only where none is).
    ("build-or-call", demo_build_or_call_load),
    # Hosted model APIs (a LiteLLM gateway's log, Bedrock in a CUR), keys mapped to deployments;
    # after the catalogue is loaded: the other way's verdict prices a self-hosted instance.
    ("hosted-model-apis", demo_model_api_load),
    # The traits the inference levers need that no file says (cold starts, objectives).
    ("inference-levers", demo_levers_load),
]


class DemoError(Exception):
    pass


def demo_data_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """Run DEMO_DATA_STEPS in order, each in `directory / <its name>`.

    Every file the steps import announces `spend_data_changed`, and the insights app's handler
    queues a findings recompute of the file's days once it commits. Where tasks run in process
    (the demo on SQLite) that was a whole recompute per file, some seventy of them, most of the
    seed's time; the caller recomputes the findings once after the steps instead (seed_demo), so
    that handler is muted while they run. The other handlers (the spend figures' data version,
    the alerts check) still hear every file.
    """
    with spend_data_changed.muted(findings_recompute_later):
        for name, step in DEMO_DATA_STEPS:
            log(f"Loading {name}…")
            step(directory=directory / name, small=small, log=log)


def demo_teams(*, small: bool) -> list[TeamSpec]:
    return [t for t in TEAMS if t.in_small or not small]


def demo_projects(*, small: bool) -> list[ProjectSpec]:
    return [p for p in PROJECTS if p.in_small or not small]


def _username(team: TeamSpec, role: str) -> str:
    return f"{team.slug}-{role}"


def demo_credentials() -> list[Credential]:
    """The demo logins that exist in the database (the full or the small demo)."""
    existing = set(
        get_user_model()
        .objects.filter(username__in=[DEMO_ADMIN_USERNAME, *_all_team_usernames()])
        .values_list("username", flat=True)
    )
    credentials = []
    if DEMO_ADMIN_USERNAME in existing:
        credentials.append(Credential("staff", "", DEMO_ADMIN_USERNAME, DEMO_PASSWORD))
    for team in TEAMS:
        for role in ("lead", "member"):
            if _username(team, role) in existing:
                credentials.append(
                    Credential(role, team.name, _username(team, role), DEMO_PASSWORD)
                )
    return credentials


def _all_team_usernames() -> list[str]:
    return [_username(t, role) for t in TEAMS for role in ("lead", "member")]


def demo_organization_create(*, small: bool, now: datetime | None = None) -> DemoOrganization:
    """Create the demo organisation in an empty database; if it is already there, change nothing.

    Raises DemoError when the database holds another organisation's teams or projects: the demo
    never mixes with real data.
    """
    if Organization.objects.filter(name=DEMO_ORGANIZATION_NAME).exists():
        return DemoOrganization(Organization.get(), created=False, credentials=demo_credentials())
    teams, projects = Team.objects.count(), Project.objects.count()
    if teams or projects:
        raise DemoError(
            f"This database already holds an organisation ({teams} teams, {projects} projects); "
            "seed_demo only fills an empty database."
        )
    with transaction.atomic():
        org = _build(small=small, now=now or timezone.now())
    return DemoOrganization(org, created=True, credentials=demo_credentials())


def _build(*, small: bool, now: datetime) -> Organization:
    rng = random.Random(DEMO_SEED)
    # Whole minutes read better on pages than the seconds of the moment the demo was made.
    now = now.replace(second=0, microsecond=0)

    org = Organization.get()
    org.name = DEMO_ORGANIZATION_NAME
    org.currency = "USD"
    org.time_zone = "America/New_York"
    org.idle_threshold_percent = Decimal("10")
    org.engineering_hourly_rate = Decimal("110")
    org.save()

    for dimension, keys in TAG_KEY_ALIASES.items():
        for key in keys:
            TagKeyAlias.objects.get_or_create(dimension=dimension, key=key)

    User = get_user_model()
    User.objects.create_superuser(
        DEMO_ADMIN_USERNAME,
        "admin@northwind.example",
        DEMO_PASSWORD,
        first_name="Ada",
        last_name="Okafor",
    )
    teams: dict[str, Team] = {}
    people: dict[str, list] = {}
    for spec in demo_teams(small=small):
        team = Team.objects.create(name=spec.name, slug=spec.slug)
        teams[spec.slug] = team
        people[spec.slug] = []
        for role, (first, last) in (("lead", spec.lead), ("member", spec.member)):
            user = User.objects.create_user(
                _username(spec, role),
                f"{first.lower()}.{last.lower()}@northwind.example".replace("á", "a"),
                DEMO_PASSWORD,
                first_name=first,
                last_name=last,
            )
            Membership.objects.create(user=user, team=team, role=role)
            people[spec.slug].append(user)

    for spec in demo_projects(small=small):
        project = project_create(
            team=teams[spec.team],
            name=spec.name,
            slug=spec.slug,
            description=spec.description,
            monthly_budget=spec.monthly_budget,
        )
        _project_fill(
            project=project, spec=spec, small=small, rng=rng, now=now, authors=people[spec.team]
        )
    return org


def _project_fill(
    *, project, spec: ProjectSpec, small: bool, rng: random.Random, now: datetime, authors: list
) -> None:
    families = [(f, f.small_outcomes if small else f.outcomes) for f in spec.families]
    families = [(f, outcomes) for f, outcomes in families if outcomes]
    deployments = [d for d in spec.deployments if d.in_small or not small]

    model_names = [f.model for f, _ in families if f.model] + [d.model for d in deployments]
    models = {
        name: model_create(
            project=project,
            name=name,
            external_id=name,
            description=f"Produced by {project.name}.",
        )
        for name in dict.fromkeys(model_names)
    }

    external_ids: set[str] = set()
    for family_index, (family, outcomes) in enumerate(families):
        hardware = HARDWARE[family.instance_type]
        shared_box = _resource_id(rng, hardware, family.region) if family.shared_instance else ""
        ended_count = sum(1 for o in outcomes if o in "SFX")
        ended_index = 0
        interrupted = False
        for i, letter in enumerate(outcomes):
            status = OUTCOMES[letter]
            started_at, ended_at = _run_window(
                rng=rng, family=family, status=status, slot=(ended_index, ended_count), now=now
            )
            ended_index += letter in "SFX"
            author = authors[(family_index + i) % len(authors)]
            if started_at is None:
                resource_ids = []  # a planned run has not been given machines yet
            elif shared_box:
                resource_ids = [shared_box]
            else:
                resource_ids = [
                    _resource_id(rng, hardware, family.region) for _ in range(family.nodes)
                ]
            experiment = experiment_create(
                project=project,
                name=_run_name(family, i),
                external_id=_external_id(rng, external_ids),
                kind=family.kind,
                status=status,
                started_at=started_at,
                ended_at=ended_at,
                model=models.get(family.model),
                instance_type=hardware.instance_type,
                gpu_type=hardware.gpu_type,
                gpu_count=hardware.gpu_count * family.nodes,
                is_spot=family.spot,
                region=family.region,
                tags=_run_tags(family=family, project=project, author=author, rng=rng),
                resource_ids=resource_ids,
                created_by=author,
            )
            if family.spot and status == Status.SUCCEEDED and not interrupted:
                _spot_interruption(experiment=experiment, rng=rng, hardware=hardware)
                interrupted = True

    for spec_d in deployments:
        hardware = HARDWARE[spec_d.instance_type]
        started_at = now - timedelta(days=rng.uniform(35, 80))
        deployment_create(
            model=models[spec_d.model],
            project=project,
            name=spec_d.name,
            external_id=spec_d.name,
            serving_pattern=spec_d.serving_pattern,
            replicas=spec_d.replicas,
            latency_objective_ms=spec_d.latency_objective_ms,
            data_residency=spec_d.data_residency,
            is_fine_tuned=spec_d.is_fine_tuned,
            instance_type=hardware.instance_type,
            gpu_type=hardware.gpu_type,
            gpu_count=hardware.gpu_count,
            region=spec_d.region,
            started_at=started_at.replace(second=0, microsecond=0),
            tags={"project": project.slug, "service": spec_d.name, "env": "prod"},
            # One instance per replica, running for as long as the deployment has.
            resource_ids=[
                _resource_id(rng, hardware, spec_d.region) for _ in range(spec_d.replicas)
            ],
        )


def _spot_interruption(*, experiment: Experiment, rng: random.Random, hardware: Hardware) -> None:
    """The first successful run of a spot family lost its first instance part way and resumed
    from its checkpoint on a new one: two resource ids with windows of their own, the case where
    a resource's window is not its run's. (No service sets windows yet, hence the ORM.)"""
    first = experiment.resources.order_by("pk").first()
    cut = experiment.started_at + (experiment.ended_at - experiment.started_at) * rng.uniform(
        0.3, 0.7
    )
    cut = cut.replace(second=0, microsecond=0)
    first.started_at, first.ended_at = experiment.started_at, cut
    first.save(update_fields=["started_at", "ended_at"])
    ExperimentResource.objects.create(
        experiment=experiment,
        resource_id=_resource_id(rng, hardware, experiment.region),
        started_at=cut,
        ended_at=experiment.ended_at,
    )


def _run_window(
    *, rng: random.Random, family: Family, status: str, slot: tuple[int, int], now: datetime
) -> tuple[datetime | None, datetime | None]:
    """When a run started and ended; `slot` is (k, n): the k-th of the family's n ended runs."""
    if status == Status.PLANNED:
        return None, None
    low, high = family.hours or DURATION_HOURS[family.kind]
    hours = rng.uniform(low, high)
    if status == Status.RUNNING:
        # Caught mid-run: it started some way into its expected length.
        started = now - timedelta(hours=hours * rng.uniform(0.2, 0.8))
        return started.replace(second=0, microsecond=0), None
    if status == Status.FAILED:
        hours *= rng.uniform(0.1, 0.6)  # failed runs die part way, and cost as much until then
    elif status == Status.STOPPED:
        hours *= rng.uniform(0.3, 0.9)
    # The k-th of n ended runs starts somewhere in the k-th n-th of the history, so a family's
    # runs follow each other in order and each is over before "now".
    k, n = slot
    span = timedelta(days=DEMO_HISTORY_DAYS - 1) - timedelta(hours=hours)
    started = (now - timedelta(days=DEMO_HISTORY_DAYS) + span * ((k + rng.random()) / n)).replace(
        second=0, microsecond=0
    )
    ended = started + timedelta(minutes=round(hours * 60))
    latest_end = now - timedelta(hours=1)
    if ended > latest_end:
        started, ended = started - (ended - latest_end), latest_end
    return started, ended


def _run_name(family: Family, index: int) -> str:
    if index < len(family.variants):
        return f"{family.stem}-{family.variants[index]}"
    return f"{family.stem}-run{index + 1:02d}"


def _run_tags(*, family: Family, project, author, rng: random.Random) -> dict:
    tags = {"project": project.slug, "framework": family.framework, "owner": author.username}
    if family.dataset:
        tags["dataset"] = family.dataset
    if family.kind in (Kind.TRAINING, Kind.FINE_TUNING):
        tags["seed"] = str(rng.randrange(1, 10_000))
    return tags


def _external_id(rng: random.Random, taken: set[str]) -> str:
    """An 8-character run id like the ones experiment trackers hand out."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    while True:
        candidate = "".join(rng.choice(alphabet) for _ in range(8))
        if candidate not in taken:
            taken.add(candidate)
            return candidate


def _resource_id(rng: random.Random, hardware: Hardware, region: str) -> str:
    if hardware.provider == "gcp":
        number = rng.randrange(10**18, 10**19)
        return f"//compute.googleapis.com/projects/northwind-ml/zones/{region}-a/instances/{number}"
    return f"i-0{rng.getrandbits(64):016x}"
