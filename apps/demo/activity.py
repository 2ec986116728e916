"""The demo's serving traffic and training curves, recorded through the same services the REST API
calls (`deployment_traffic_record`, `experiment_metrics_record`), as a serving stack and a
training script would send them.

Every deployment serves hourly traffic over its life in the demo's span: a daily cycle (busier in
the working hours of New York, where Northwind is), quieter weekends, a few duplicate requests
(what a cache would save), tokens and latencies. Every training and fine-tuning run reports its
loss every few steps: most converge (an exponential fall to a floor, with noise), about one in
five stays flat (a run that does not learn: what "stop runs that do not converge" is about).
"""

import math
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.utils import timezone

from apps.deployments.models import Deployment
from apps.deployments.services import TrafficFigures, deployment_traffic_record
from apps.experiments.models import Experiment
from apps.experiments.services import MetricValues, experiment_metrics_record

SEED = 1717
HISTORY_DAYS = 88  # seed.DEMO_HISTORY_DAYS: the span the bill covers
LOSS_POINTS = 60  # points per run: enough for a curve, few enough for a fast seed
FLAT_SHARE = 0.2


def _hours(start: datetime, end: datetime) -> list[datetime]:
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [first + timedelta(hours=n) for n in range(int((end - first) / timedelta(hours=1)))]


def _traffic(deployment: Deployment, rng: random.Random, *, now: datetime) -> list[TrafficFigures]:
    start = max(deployment.started_at or now, now - timedelta(days=HISTORY_DAYS))
    end = min(deployment.ended_at or now, now)
    peak = rng.choice((400, 1_500, 6_000, 20_000))  # requests in the busiest hour
    figures = []
    for hour in _hours(start, end):
        local = hour - timedelta(hours=5)  # New York, near enough for a daily shape
        daily = 0.25 + 0.75 * max(0.0, math.sin(math.pi * (local.hour - 6) / 14))
        weekly = 0.55 if local.weekday() >= 5 else 1.0
        requests = int(peak * daily * weekly * rng.uniform(0.85, 1.15))
        latency = rng.uniform(80, 160) * (1 + 0.4 * daily)
        figures.append(
            TrafficFigures(
                hour=hour,
                requests=requests,
                duplicate_requests=int(requests * rng.uniform(0.05, 0.2)),
                tokens_in=requests * rng.randint(200, 600),
                tokens_out=requests * rng.randint(50, 250),
                latency_p50_ms=round(latency, 1),
                latency_p95_ms=round(latency * 2.2, 1),
                latency_p99_ms=round(latency * 3.5, 1),
            )
        )
    return figures


def _loss(experiment: Experiment, rng: random.Random) -> list[MetricValues]:
    flat = rng.random() < FLAT_SHARE or experiment.status == Experiment.Status.FAILED
    start_loss, floor = rng.uniform(2.5, 4.5), rng.uniform(0.15, 0.6)
    rate = rng.uniform(3.0, 6.0)
    steps = rng.choice((500, 1_000, 2_000, 5_000))
    began = experiment.started_at or timezone.now()
    span = (experiment.ended_at or timezone.now()) - began
    points = []
    for n in range(LOSS_POINTS):
        progress = n / (LOSS_POINTS - 1)
        if flat:
            value = start_loss * rng.uniform(0.97, 1.03)
        else:
            value = floor + (start_loss - floor) * math.exp(-rate * progress)
            value *= rng.uniform(0.98, 1.02)
        points.append(
            MetricValues(
                step=int(progress * steps),
                values={"loss": round(value, 4)},
                recorded_at=began + span * progress,
            )
        )
    return points


def demo_activity_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step: traffic for every deployment, a loss curve for every training run."""
    rng = random.Random(SEED)
    now = timezone.now()
    hours = 0
    deployments = list(Deployment.objects.order_by("pk"))
    for deployment in deployments:
        written = deployment_traffic_record(
            deployment=deployment, hours=_traffic(deployment, rng, now=now)
        )
        hours += written.created + written.updated
    # Runs that came with their own loss (a tracker's history, the demo's stalled run) keep it.
    runs = list(
        Experiment.objects.filter(kind__in=[Experiment.Kind.TRAINING, Experiment.Kind.FINE_TUNING])
        .exclude(metric_points__name="loss")
        .order_by("pk")
    )
    for run in runs:
        experiment_metrics_record(experiment=run, points=_loss(run, rng))
    log(
        f"Recorded {hours:,} hours of traffic for {len(deployments)} deployments and loss curves "
        f"for {len(runs)} training runs (through the API's services)."
    )
