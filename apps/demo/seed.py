"""The demo organisation: a made-up company's ML teams, projects, runs, models and deployments.

`seed_demo` builds the organisation here, then runs the data steps in `DEMO_DATA_STEPS`, which write
files (billing exports, GPU metrics) into a directory and load them through the real importers.

Everything is described by the catalogue below and laid out with a fixed random seed, so two runs
create the same organisation; only the times move, because they are relative to now (the last
~3 months). Each experiment family lists its runs as outcome letters, oldest first, so the counts
per status and kind can be read off the catalogue:

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
from apps.projects.models import Project, TagKeyAlias
from apps.projects.services import project_create

from .billing import demo_billing_load
from .gpu import demo_gpu_metrics_load

DEMO_ORGANIZATION_NAME = "Northwind Robotics"
DEMO_PASSWORD = "costsite-demo"  # noqa: S105 (printed on purpose: it is the demo's login)
DEMO_ADMIN_USERNAME = "admin"
DEMO_SEED = 20240917
# How far back the runs go: about one quarter, so a quarter-over-quarter view has data.
DEMO_HISTORY_DAYS = 88

Kind = Experiment.Kind
Status = Experiment.Status

OUTCOMES = {
    "S": Status.SUCCEEDED,
    "F": Status.FAILED,
    "X": Status.STOPPED,
    "R": Status.RUNNING,
    "P": Status.PLANNED,
}


@dataclass(frozen=True)
class Hardware:
    instance_type: str
    gpu_type: str
    gpu_count: int
    provider: str  # "aws" or "gcp": decides the shape of resource ids


HARDWARE = {
    h.instance_type: h
    for h in [
        Hardware("p5.48xlarge", "H100-80GB", 8, "aws"),
        Hardware("p4de.24xlarge", "A100-80GB", 8, "aws"),
        Hardware("p4d.24xlarge", "A100-40GB", 8, "aws"),
        Hardware("g5.12xlarge", "A10G", 4, "aws"),
        Hardware("g5.2xlarge", "A10G", 1, "aws"),
        Hardware("g5.xlarge", "A10G", 1, "aws"),
        Hardware("g6.xlarge", "L4", 1, "aws"),
        Hardware("g4dn.xlarge", "T4", 1, "aws"),
        Hardware("c6i.4xlarge", "", 0, "aws"),
        Hardware("a3-highgpu-8g", "H100-80GB", 8, "gcp"),
        Hardware("a2-highgpu-1g", "A100-40GB", 1, "gcp"),
    ]
}

# Typical run lengths in hours, by kind; notebooks stay up for days, which is the point.
DURATION_HOURS = {
    Kind.TRAINING: (8.0, 60.0),
    Kind.FINE_TUNING: (3.0, 18.0),
    Kind.EVALUATION: (0.5, 3.0),
    Kind.NOTEBOOK: (48.0, 216.0),
}


@dataclass(frozen=True)
class Family:
    """Runs of one experiment under different settings, named `<stem>-<variant>`."""

    stem: str
    kind: str
    instance_type: str
    outcomes: str
    small_outcomes: str = ""  # runs in the --small demo; empty: the family is not in it
    region: str = "us-east-1"
    spot: bool = False
    nodes: int = 1
    hours: tuple[float, float] | None = None
    model: str = ""
    dataset: str = ""
    framework: str = "pytorch"
    # Evaluation jobs queue on one long-lived box: the same resource id, a window per run.
    shared_instance: bool = False
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeploymentSpec:
    name: str
    model: str
    serving_pattern: str
    instance_type: str
    replicas: int
    latency_objective_ms: int | None = None
    region: str = "us-east-1"
    data_residency: bool = False
    is_fine_tuned: bool = False
    in_small: bool = False


@dataclass(frozen=True)
class ProjectSpec:
    slug: str
    name: str
    team: str
    description: str
    monthly_budget: Decimal | None
    families: tuple[Family, ...]
    deployments: tuple[DeploymentSpec, ...] = ()
    in_small: bool = False


@dataclass(frozen=True)
class TeamSpec:
    slug: str
    name: str
    lead: tuple[str, str]
    member: tuple[str, str]
    in_small: bool = False


TEAMS = (
    TeamSpec("vision", "Vision", ("Priya", "Raman"), ("Tomás", "Ortega"), in_small=True),
    TeamSpec("language", "Language", ("Hannah", "Schmidt"), ("Kwame", "Mensah"), in_small=True),
    TeamSpec("recommendations", "Recommendations", ("Daniel", "Kim"), ("Sofia", "Rossi")),
    TeamSpec("platform", "Platform", ("Olu", "Adeyemi"), ("Mei", "Lin")),
)

PROJECTS = (
    ProjectSpec(
        "defect-detection",
        "Defect detection",
        "vision",
        "Finds scratches and dents in the assembly-line camera feed: a ViT trained on 1.2M "
        "labelled frames, served next to the line.",
        Decimal("18000"),
        (
            Family(
                "vit-b16",
                Kind.TRAINING,
                "p4d.24xlarge",
                outcomes="SFSSXR",
                small_outcomes="SFR",
                spot=True,
                model="defect-vit",
                dataset="line-frames-v4",
                variants=("baseline", "lr3e-4", "mixup", "ema", "lr1e-4-cosine", "frames-v4"),
            ),
            Family(
                "efficientnet-b3-sweep",
                Kind.TRAINING,
                "g5.2xlarge",
                outcomes="SSFS",
                dataset="line-frames-v4",
                variants=("wd1e-2", "wd5e-3", "res384", "res320"),
            ),
            Family(
                "defect-eval",
                Kind.EVALUATION,
                "g5.xlarge",
                outcomes="SSSF",
                small_outcomes="SS",
                shared_instance=True,
                dataset="line-frames-holdout",
            ),
            Family(
                "labelling-notebook",
                Kind.NOTEBOOK,
                "g4dn.xlarge",
                outcomes="XR",
                small_outcomes="R",
                variants=("priya", "tomas"),
            ),
        ),
        (
            DeploymentSpec(
                "defect-vit-edge",
                "defect-vit",
                "realtime",
                "g5.xlarge",
                2,
                latency_objective_ms=120,
                in_small=True,
            ),
        ),
        in_small=True,
    ),
    ProjectSpec(
        "retail-shelf-vision",
        "Shelf monitoring",
        "vision",
        "Spots empty shelves and misplaced stock in store photos; an audit runs every night.",
        Decimal("9000"),
        (
            Family(
                "yolov8-shelf",
                Kind.TRAINING,
                "g5.12xlarge",
                outcomes="SSFSP",
                small_outcomes="SP",
                model="shelf-yolo",
                dataset="shelf-photos-2024",
                variants=("m-640", "l-640", "l-1024", "x-640", "x-1024"),
            ),
            Family(
                "shelf-eval",
                Kind.EVALUATION,
                "g5.xlarge",
                outcomes="SS",
                shared_instance=True,
                dataset="shelf-photos-holdout",
            ),
        ),
        (
            DeploymentSpec(
                "shelf-audit-nightly", "shelf-yolo", "batch", "g4dn.xlarge", 1, in_small=True
            ),
        ),
        in_small=True,
    ),
    ProjectSpec(
        "medical-segmentation",
        "Medical image segmentation",
        "vision",
        "Segments organs in CT scans for a hospital partner. Patient data stays in Frankfurt.",
        Decimal("25000"),
        (
            Family(
                "unet-3d",
                Kind.TRAINING,
                "p4de.24xlarge",
                outcomes="FSSX",
                region="eu-central-1",
                model="seg-unet3d",
                dataset="ct-scans-v2",
                variants=("base", "deep", "aug", "fp8"),
            ),
            Family(
                "sam-finetune",
                Kind.FINE_TUNING,
                "g5.12xlarge",
                outcomes="SSR",
                region="eu-central-1",
                model="seg-sam-ft",
                dataset="ct-scans-v2",
                variants=("lora-r8", "lora-r16", "full"),
            ),
            Family(
                "seg-eval",
                Kind.EVALUATION,
                "g5.xlarge",
                outcomes="SS",
                region="eu-central-1",
                shared_instance=True,
                dataset="ct-scans-holdout",
            ),
        ),
        (
            DeploymentSpec(
                "seg-batch-nightly",
                "seg-sam-ft",
                "batch",
                "g5.2xlarge",
                1,
                region="eu-central-1",
                data_residency=True,
                is_fine_tuned=True,
            ),
        ),
    ),
    ProjectSpec(
        "support-assistant",
        "Support assistant",
        "language",
        "Llama 3.1 8B fine-tuned on five years of support tickets; drafts first-line answers.",
        Decimal("40000"),
        (
            Family(
                "llama-8b-sft",
                Kind.FINE_TUNING,
                "p4d.24xlarge",
                outcomes="SFSXSR",
                small_outcomes="SFX",
                model="support-llama-8b",
                dataset="tickets-2019-2024",
                variants=("v1", "v2-longctx", "v3", "v3-lr2e-5", "v4", "v5-dedup"),
            ),
            Family(
                "llama-8b-dpo",
                Kind.FINE_TUNING,
                "p4de.24xlarge",
                outcomes="FSP",
                model="support-llama-8b",
                dataset="agent-preferences",
                variants=("beta0.1", "beta0.3", "beta0.1-v2"),
            ),
            Family(
                "support-evals",
                Kind.EVALUATION,
                "g5.2xlarge",
                outcomes="SSSSF",
                small_outcomes="SF",
                shared_instance=True,
                dataset="tickets-golden-500",
            ),
            Family(
                "prompt-notebook",
                Kind.NOTEBOOK,
                "g5.xlarge",
                outcomes="XXR",
                small_outcomes="X",
                variants=("hannah", "kwame", "kwame-2"),
            ),
        ),
        (
            DeploymentSpec(
                "support-llm-8b",
                "support-llama-8b",
                "realtime",
                "g5.12xlarge",
                2,
                latency_objective_ms=1500,
                is_fine_tuned=True,
                in_small=True,
            ),
        ),
        in_small=True,
    ),
    ProjectSpec(
        "doc-search",
        "Document search",
        "language",
        "Embeds the internal wiki and contracts for semantic search; a vector database serves it.",
        Decimal("12000"),
        (
            Family(
                "e5-embedder-ft",
                Kind.FINE_TUNING,
                "g6.xlarge",
                outcomes="SSF",
                small_outcomes="S",
                model="doc-embedder",
                dataset="wiki-pairs",
                variants=("base", "hard-negatives", "large"),
            ),
            Family(
                "rerank-eval",
                Kind.EVALUATION,
                "g6.xlarge",
                outcomes="SS",
                dataset="search-judgements",
            ),
        ),
        (
            DeploymentSpec(
                "embedder-api",
                "doc-embedder",
                "realtime",
                "g6.xlarge",
                3,
                latency_objective_ms=80,
            ),
        ),
        in_small=True,
    ),
    ProjectSpec(
        "contract-ner",
        "Contract entity extraction",
        "language",
        "Pulls parties, dates and amounts out of supplier contracts.",
        Decimal("6000"),
        (
            Family(
                "deberta-ner",
                Kind.FINE_TUNING,
                "g5.2xlarge",
                outcomes="SSFS",
                model="contract-ner",
                dataset="contracts-annotated",
                variants=("base", "large", "large-crf", "v3-large"),
            ),
            Family(
                "annotation-notebook",
                Kind.NOTEBOOK,
                "g4dn.xlarge",
                outcomes="XR",
                variants=("kwame", "hannah"),
            ),
        ),
    ),
    ProjectSpec(
        "llm-pretraining",
        "Foundation model pretraining",
        "language",
        "A 1.3B-parameter decoder trained from scratch on our own corpus, to learn whether a small "
        "in-house model can replace paid API calls.",
        Decimal("90000"),
        (
            Family(
                "nw-1b3-pretrain",
                Kind.TRAINING,
                "p5.48xlarge",
                outcomes="FXSR",
                nodes=4,
                hours=(150.0, 400.0),
                model="nw-1.3b",
                dataset="corpus-300b",
                variants=("attempt1", "attempt2", "main", "continued"),
            ),
            Family(
                "nw-1b3-ablation",
                Kind.TRAINING,
                "a3-highgpu-8g",
                outcomes="SFFS",
                region="us-central1",
                spot=True,
                dataset="corpus-10b",
                variants=("rope", "alibi", "swiglu", "muon"),
            ),
            Family(
                "tokenizer-notebook",
                Kind.NOTEBOOK,
                "a2-highgpu-1g",
                outcomes="X",
                region="us-central1",
                variants=("hannah",),
            ),
        ),
    ),
    ProjectSpec(
        "home-feed-ranking",
        "Home feed ranking",
        "recommendations",
        "Ranks the home feed for 4M daily users; the ranker runs on CPUs behind a 40 ms budget.",
        Decimal("30000"),
        (
            Family(
                "dlrm-ranker",
                Kind.TRAINING,
                "p4d.24xlarge",
                outcomes="SSSFSR",
                model="feed-ranker-dlrm",
                dataset="feed-clicks-90d",
                variants=(
                    "daily-0801",
                    "daily-0815",
                    "daily-0829",
                    "bigger-emb",
                    "daily-0912",
                    "daily-0926",
                ),
            ),
            Family(
                "ranker-offline-eval",
                Kind.EVALUATION,
                "g5.xlarge",
                outcomes="SSSS",
                shared_instance=True,
                dataset="feed-clicks-holdout",
            ),
        ),
        (
            DeploymentSpec(
                "feed-ranker",
                "feed-ranker-dlrm",
                "realtime",
                "c6i.4xlarge",
                6,
                latency_objective_ms=40,
            ),
        ),
    ),
    ProjectSpec(
        "similar-items",
        "Similar items",
        "recommendations",
        "Two-tower retrieval for 'you may also like', recomputed in a nightly batch.",
        Decimal("8000"),
        (
            Family(
                "two-tower",
                Kind.TRAINING,
                "g5.12xlarge",
                outcomes="SFSS",
                spot=True,
                model="item-two-tower",
                dataset="co-views-60d",
                variants=("d128", "d256", "d256-hardneg", "d256-v2"),
            ),
        ),
        (DeploymentSpec("similar-items-batch", "item-two-tower", "batch", "g4dn.xlarge", 1),),
    ),
    ProjectSpec(
        "ads-ctr",
        "Ads click-through prediction",
        "recommendations",
        "Predicts click-through for sponsored listings; a gradient-boosted model against a DeepFM.",
        Decimal("20000"),
        (
            Family(
                "ctr-xgboost",
                Kind.TRAINING,
                "g5.2xlarge",
                outcomes="SSX",
                model="ctr-gbdt",
                framework="xgboost",
                dataset="ad-impressions-30d",
                variants=("depth8", "depth10", "depth12"),
            ),
            Family("ctr-notebook", Kind.NOTEBOOK, "g5.xlarge", outcomes="R", variants=("sofia",)),
            Family(
                "ctr-deepfm",
                Kind.TRAINING,
                "a2-highgpu-1g",
                outcomes="FSP",
                region="us-central1",
                model="ctr-deepfm",
                dataset="ad-impressions-30d",
                variants=("base", "base-fixed", "wide"),
            ),
        ),
    ),
    ProjectSpec(
        "ml-notebooks",
        "Shared notebooks",
        "platform",
        "JupyterHub GPU notebooks for everyone: the place where idle GPUs hide.",
        Decimal("7500"),
        (
            Family(
                "jupyter-gpu",
                Kind.NOTEBOOK,
                "g5.xlarge",
                outcomes="XXXRR",
                variants=("mei", "olu", "daniel", "sofia", "tomas"),
            ),
            Family(
                "jupyter-a100",
                Kind.NOTEBOOK,
                "a2-highgpu-1g",
                outcomes="XR",
                region="us-central1",
                variants=("priya", "hannah"),
            ),
        ),
    ),
    ProjectSpec(
        "gpu-benchmarks",
        "GPU benchmarks",
        "platform",
        "Throughput and cost per token of each GPU type, so hardware is chosen on price.",
        None,
        (
            Family(
                "bench-llm-throughput",
                Kind.EVALUATION,
                "p5.48xlarge",
                outcomes="SSF",
                region="us-west-2",
                variants=("vllm-fp16", "vllm-fp8", "trtllm-fp8"),
            ),
            Family(
                "bench-l4-vs-a10g",
                Kind.EVALUATION,
                "g6.xlarge",
                outcomes="SS",
                variants=("l4", "a10g"),
            ),
            Family(
                "bench-h100-inference",
                Kind.EVALUATION,
                "p5.48xlarge",
                outcomes="P",
                region="us-west-2",
                variants=("sglang",),
            ),
        ),
    ),
)
# The tag keys the company's resources already carry (DESIGN.md: attribution by tags first).
TAG_KEY_ALIASES = {
    TagKeyAlias.Dimension.PROJECT: ("project", "ml-project", "user:project"),
    TagKeyAlias.Dimension.EXPERIMENT: ("experiment", "run-id"),
    TagKeyAlias.Dimension.DEPLOYMENT: ("deployment", "service"),
}


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
# importer, as an operator would. The bill comes first, so the GPU metrics join billed resources.
DEMO_DATA_STEPS: list[tuple[str, DemoDataStep]] = [
    ("billing", demo_billing_load),
    ("gpu-metrics", demo_gpu_metrics_load),
]


class DemoError(Exception):
    pass


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
