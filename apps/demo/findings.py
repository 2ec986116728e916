"""What the demo needs for part 3's findings, beside the organisation seed.py builds: a
pre-training run whose loss stopped converging, an on-demand fine-tune that could run on spot, a
fine-tune in a region where its instance type costs more than in another, the price catalogue the
levers price against, and (billing.py calls `savings_plan_unused_rows`) a savings plan used only
half.

Runs go through the experiments' services (their loss through the metric service, as a training
script sends it); the bill step that follows bills them like every other run.
"""

import math
import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from apps.experiments.models import Experiment
from apps.experiments.services import MetricValues, experiment_create, experiment_metrics_record
from apps.projects.models import Project

DEMO_SEED = 16
# The stalled run: the loss falls for its first 40% of points, then moves by noise only.
PLATEAU_POINTS = 240
PLATEAU_FROM = 0.4


def _hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _instance_id(rng: random.Random) -> str:
    """An EC2 instance id, as the demo's other machines have."""
    return f"i-0{rng.getrandbits(64):016x}"


def demo_part3_runs(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step (before the bill): the runs part 3's findings are about, and the price
    catalogue if none is loaded yet."""
    from apps.insights.catalogue import catalogue_load
    from apps.insights.models import GpuInstancePrice

    if not GpuInstancePrice.objects.exists():
        result = catalogue_load()
        log(f"Price catalogue: {result.loaded}, {len(result.refused)} rows refused")
    project = Project.objects.order_by("pk").first()
    if project is None:
        return
    now = _hour(datetime.now(UTC))
    rng = random.Random(DEMO_SEED)

    started = now - timedelta(days=5)
    pretrain = experiment_create(
        project=project,
        name="pretrain-1.3b-plateau",
        external_id="pretrain-plateau-1",
        kind=Experiment.Kind.TRAINING,
        status=Experiment.Status.RUNNING,
        started_at=started,
        instance_type="p4d.24xlarge",
        gpu_type="A100",
        gpu_count=8,
        region="us-east-1",
        tags={"owner": "demo"},
        resource_ids=[_instance_id(rng)],
    )
    span = (now - started).total_seconds()
    points = []
    for number in range(PLATEAU_POINTS):
        share = number / PLATEAU_POINTS
        if share < PLATEAU_FROM:
            value = 1.9 + 2.4 * math.exp(-6 * share / PLATEAU_FROM)
        else:
            value = 1.9 + 2.4 * math.exp(-6) + rng.uniform(-0.004, 0.004)
        points.append(
            MetricValues(
                step=number * 500,
                values={"loss": round(value, 5)},
                recorded_at=started + timedelta(seconds=span * share),
            )
        )
    experiment_metrics_record(experiment=pretrain, points=points)

    experiment_create(
        project=project,
        name="finetune-on-demand",
        external_id="ft-on-demand-1",
        kind=Experiment.Kind.FINE_TUNING,
        status=Experiment.Status.SUCCEEDED,
        started_at=now - timedelta(days=9),
        ended_at=now - timedelta(days=6),
        instance_type="p4d.24xlarge",
        gpu_type="A100",
        gpu_count=8,
        region="us-east-1",
        tags={"owner": "demo", "checkpoint_interval_hours": "0.5"},
        resource_ids=[_instance_id(rng)],
    )
    experiment_create(
        project=project,
        name="finetune-eu-west",
        external_id="ft-eu-west-1",
        kind=Experiment.Kind.FINE_TUNING,
        status=Experiment.Status.SUCCEEDED,
        started_at=now - timedelta(days=12),
        ended_at=now - timedelta(days=10),
        instance_type="g5.12xlarge",
        gpu_type="A10G",
        gpu_count=4,
        region="eu-west-1",
        tags={"owner": "demo"},
        resource_ids=[_instance_id(rng)],
    )
    log(f"Part 3 runs in {project.slug}: a stalled pre-training run, two on-demand fine-tunes")


def savings_plan_unused_rows(
    *, covered_by_day: dict[date, Decimal], row: Callable[[date, Decimal], list[str]]
) -> list[list[str]]:
    """The savings plan is used only half: each day it covered `c` of usage, `c` more of its
    commitment went unused (FOCUS: a Committed line with CommitmentDiscountStatus Unused)."""
    return [row(day, amount) for day, amount in sorted(covered_by_day.items()) if amount > 0]
