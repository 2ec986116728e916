"""The demo organisation's catalogue: its hardware, teams, projects, experiment families and
deployments, and the tag keys its resources carry. Each experiment family lists its runs as outcome
letters, oldest first (S succeeded · F failed · X stopped · R running · P planned); seed.py lays
the catalogue out with a fixed random seed.
"""

from dataclasses import dataclass
from decimal import Decimal

from apps.experiments.models import Experiment
from apps.projects.models import TagKeyAlias

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
