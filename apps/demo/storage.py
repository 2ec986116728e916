"""The demo's storage story: every data class growing, tagged as the teams tag them, so the
storage page and the storage findings (apps/insights/compute_storage.py) have something to say.

- home-feed-ranking's checkpoint bucket only grows (150 GB a day): checkpoints_only_grow.
- llm-pretraining reads its corpus from a bucket in us-west-2 while its running pre-training
  run's GPUs are in us-east-1: 3 TB a day between regions, tagged to the run (data_far_from_gpus).
- support-assistant keeps the checkpoints of a fine-tune that succeeded weeks ago
  (storage_of_finished_runs), and its model's artefacts (tagged to the model) grow with releases.
- doc-search's vector database (a block volume tagged vector-db) grows 1.8% a day, about 70% a
  month (vector_db_growth).
- defect-detection copied its image dataset twice over for ten days three weeks ago
  (storage_spike); ml-notebooks' logs grow.

These are daily lines (one a whole UTC day, as CUR and FOCUS storage exports often are) whose
sizes are functions of the day: they draw nothing from the bill's random stream, so the rest of
the demo's bill is unchanged by them. A project or run the (small) demo lacks is left out.
"""

import zlib
from datetime import datetime, timedelta
from decimal import Decimal

from .billing import REGIONS, SUB_ACCOUNTS, Resource

EAST, WEST = REGIONS  # us-east-1, us-west-2
DAY = timedelta(days=1)


def _days(moment: datetime, since: datetime) -> int:
    return max(0, (moment - since) // DAY)


def _midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _wiggle(moment: datetime, spread: int = 6) -> Decimal:
    """A deterministic ±spread% from the day (sizes read from a real bill are never round)."""
    return 1 + Decimal((moment.toordinal() * 7919) % (2 * spread + 1) - spread) / 100


def _bucket(name: str, tags: dict, size, *, start, end, region=EAST, kind="bucket") -> Resource:
    volume = f"vol-0{zlib.crc32(name.encode()):012x}"
    resource_id = (
        f"arn:aws:s3:::{name}"
        if kind == "bucket"
        else f"arn:aws:ec2:{region[0]}:{SUB_ACCOUNTS[0][0]}:volume/{volume}"
    )
    return Resource(
        resource_id,
        name,
        kind,
        Decimal(0),
        region=region,
        sub_account=SUB_ACCOUNTS[0],
        tags=tags,
        start=start,
        end=end,
        daily=True,
        size=size,
    )


def demo_storage_resources(window_start: datetime, now: datetime) -> list[Resource]:
    from apps.experiments.models import Experiment
    from apps.projects.models import Project

    projects = {project.slug: project for project in Project.objects.all()}
    start = window_start
    resources: list[Resource] = []

    def run_of(slug: str, **filters) -> Experiment | None:
        return (
            Experiment.objects.filter(project__slug=slug, **filters)
            .exclude(started_at=None)
            .order_by("started_at", "pk")
            .first()
        )

    if "home-feed-ranking" in projects:
        resources.append(
            _bucket(
                "northwind-home-feed-ranking-checkpoints",
                {
                    "project": "home-feed-ranking",
                    "data_class": "checkpoints",
                    "model": "feed-ranker-dlrm",
                },
                lambda day: Decimal(2000 + 150 * _days(day, start)),
                start=start,
                end=now,
            )
        )
    pretraining = run_of("llm-pretraining", kind=Experiment.Kind.TRAINING, status="running")
    if pretraining is not None:
        resources.append(
            _bucket(
                "northwind-llm-pretraining-corpus",
                {"project": "llm-pretraining", "data_class": "dataset", "model": "nw-1.3b"},
                lambda day: (Decimal(20000) * Decimal("1.002") ** _days(day, start)).quantize(
                    Decimal(1)
                ),
                start=start,
                end=now,
                region=WEST,
            )
        )
        began = max(
            pretraining.started_at.replace(hour=0, minute=0, second=0, microsecond=0), start
        )
        resources.append(
            Resource(
                "",
                "",
                "egress",
                Decimal(0),
                region=WEST,
                sub_account=SUB_ACCOUNTS[0],
                tags={
                    "project": "llm-pretraining",
                    "run-id": pretraining.external_id or pretraining.name,
                },
                start=began,
                end=now,
                daily=True,
                size=lambda day: Decimal(3000) * _wiggle(day),
                transfer=(WEST, EAST),
            )
        )
    fine_tune = run_of(
        "support-assistant",
        kind=Experiment.Kind.FINE_TUNING,
        status=Experiment.Status.SUCCEEDED,
        ended_at__lt=now - timedelta(days=21),
    )
    if fine_tune is not None:
        resources.append(
            _bucket(
                f"northwind-support-assistant-{fine_tune.name}-ckpt",
                {
                    "project": "support-assistant",
                    "run-id": fine_tune.external_id or fine_tune.name,
                    "data_class": "checkpoints",
                    "model": "support-llama-8b",
                },
                lambda day: Decimal(1500),
                start=max(
                    fine_tune.started_at.replace(hour=0, minute=0, second=0, microsecond=0), start
                ),
                end=now,
            )
        )
    if "support-assistant" in projects:
        resources.append(
            _bucket(
                "northwind-support-assistant-model-artifacts",
                {
                    "project": "support-assistant",
                    "data_class": "artifacts",
                    "model": "support-llama-8b",
                },
                # A release every two weeks adds 40 GB.
                lambda day: Decimal(400 + 40 * (_days(day, start) // 14)),
                start=start,
                end=now,
            )
        )
    if "doc-search" in projects:
        resources.append(
            _bucket(
                "doc-search-vectors",
                {"project": "doc-search", "data_class": "vector-db", "model": "doc-embedder"},
                lambda day: (Decimal(300) * Decimal("1.018") ** _days(day, start)).quantize(
                    Decimal(1)
                ),
                start=start,
                end=now,
                kind="volume",
            )
        )
    if "defect-detection" in projects:
        spike = (now - timedelta(days=24), now - timedelta(days=14))
        resources.append(
            _bucket(
                "northwind-defect-detection-images",
                {"project": "defect-detection", "data_class": "dataset"},
                lambda day: Decimal(24000 if spike[0] <= day < spike[1] else 8000),
                start=start,
                end=now,
            )
        )
    if "ml-notebooks" in projects:
        resources.append(
            _bucket(
                "northwind-ml-notebooks-logs",
                {"project": "ml-notebooks", "data_class": "logs"},
                lambda day: Decimal(200 + 6 * _days(day, start)),
                start=start,
                end=now,
            )
        )
    return resources
