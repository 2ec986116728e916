"""The demo's build-or-call: a model of each verdict, with hourly traffic and an API model picked.

- `embedder-api` (the document embedder): high, steady traffic on three L4s; against a large
  embedding API, self-hosting wins (`self_host`).
- `support-llm-8b` (a fine-tuned Llama 8B on two g5.12xlarge): a few dozen requests an hour in
  office hours, none at night; a provider that serves fine-tuned Llamas is cheaper (`call_api`).
- `seg-batch-nightly` (segmentation under data residency): a nightly batch; self-hosting is
  required whatever the cost (`self_host_required`).

Traffic of the last 35 days goes through the deployments' traffic service, as a serving stack's
reports do, every hour of it (an hour without traffic reported as zero requests), so it replaces
the generic traffic another step wrote for these three; the API model is picked among a few
comparable ones so that the verdict is the one meant (the first that gives it; else the first).
The price catalogue is loaded from the project's price files if it is empty.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.utils import timezone

from apps.deployments.models import Deployment
from apps.deployments.services import TrafficFigures, deployment_traffic_record
from apps.insights.build_or_call import CALL_API, SELF_HOST, SELF_HOST_REQUIRED
from apps.insights.catalogue import catalogue_load
from apps.insights.models import BuildOrCallInputs, ModelApiPrice
from apps.insights.selectors_build_or_call import build_or_call_result, default_period
from apps.insights.services_build_or_call import build_or_call_inputs_save

TRAFFIC_DAYS = 35
SEED = 19


@dataclass(frozen=True)
class Pick:
    deployment: str
    verdict: str
    candidates: tuple[str, ...]
    traffic: Callable[[datetime, random.Random], TrafficFigures | None]
    api_serves_fine_tuned: bool = False


def _embedder(hour: datetime, rng: random.Random) -> TrafficFigures:
    # Documents embedded around the clock, a fifth more in the working day.
    requests = int(160_000 * (1.1 if 12 <= hour.hour < 22 else 0.9) * rng.uniform(0.95, 1.05))
    return TrafficFigures(
        hour=hour,
        requests=requests,
        duplicate_requests=requests // 20,
        tokens_in=requests * 400,
        tokens_out=0,
        latency_p50_ms=18,
        latency_p95_ms=rng.uniform(40, 70),
        latency_p99_ms=rng.uniform(80, 120),
    )


def _support(hour: datetime, rng: random.Random) -> TrafficFigures | None:
    # Support agents in New York, weekdays 9:00-18:00: nothing at night or at weekends.
    if hour.weekday() >= 5 or not 13 <= hour.hour < 22:
        return None
    requests = rng.randint(20, 110)
    return TrafficFigures(
        hour=hour,
        requests=requests,
        duplicate_requests=requests // 10,
        tokens_in=requests * rng.randint(800, 1000),
        tokens_out=requests * rng.randint(200, 300),
        latency_p50_ms=rng.uniform(400, 600),
        latency_p95_ms=rng.uniform(900, 1400),
        latency_p99_ms=rng.uniform(1500, 2500),
    )


def _segmentation(hour: datetime, rng: random.Random) -> TrafficFigures | None:
    # The nightly batch: scans segmented from 02:00 to 05:00 UTC.
    if not 2 <= hour.hour < 5:
        return None
    requests = rng.randint(3000, 4000)
    return TrafficFigures(
        hour=hour,
        requests=requests,
        tokens_in=requests * 1100,
        tokens_out=requests * 60,
        latency_p50_ms=rng.uniform(150, 250),
        latency_p95_ms=rng.uniform(300, 450),
    )


PICKS = (
    Pick(
        "embedder-api",
        SELF_HOST,
        ("text-embedding-3-large", "text-embedding-ada-002", "text-embedding-3-small"),
        _embedder,
    ),
    Pick(
        "support-llm-8b",
        CALL_API,
        ("together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "gpt-4o-mini"),
        _support,
        api_serves_fine_tuned=True,
    ),
    Pick("seg-batch-nightly", SELF_HOST_REQUIRED, ("gpt-4o",), _segmentation),
)


def _traffic_write(deployment: Deployment, pick: Pick, *, now: datetime) -> int:
    since = now - timedelta(days=TRAFFIC_DAYS)
    rng = random.Random(f"{SEED}-{deployment.name}")
    first = max(since, deployment.started_at or since).replace(minute=0, second=0, microsecond=0)
    last = now.replace(minute=0, second=0, microsecond=0)
    hours = []
    hour = first
    while hour < last:
        figures = pick.traffic(hour.astimezone(UTC), rng)
        # An hour without traffic is reported as such: it replaces whatever another step wrote.
        hours.append(figures or TrafficFigures(hour=hour.astimezone(UTC), requests=0))
        hour += timedelta(hours=1)
    deployment_traffic_record(deployment=deployment, hours=hours)
    return len(hours)


def demo_build_or_call_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """`directory` is unused: traffic is reported through the service, not a file."""
    if not ModelApiPrice.objects.exists():
        catalogue_load()
    now = timezone.now()
    start, end = default_period()
    for pick in PICKS:
        deployment = Deployment.objects.filter(name=pick.deployment).first()
        if deployment is None:  # the small demo leaves some deployments out
            continue
        written = _traffic_write(deployment, pick, now=now)
        candidates = [
            name for name in pick.candidates if ModelApiPrice.objects.filter(name=name).exists()
        ]
        chosen = None
        for name in candidates:
            choices = BuildOrCallInputs(
                deployment=deployment,
                api_model=name,
                api_serves_fine_tuned=pick.api_serves_fine_tuned,
            )
            result = build_or_call_result(
                deployment=deployment, start=start, end=end, choices=choices
            )
            if result.verdict == pick.verdict:
                chosen = name
                break
        chosen = chosen or (candidates[0] if candidates else "")
        build_or_call_inputs_save(
            deployment=deployment,
            by=None,
            api_model=chosen,
            api_serves_fine_tuned=pick.api_serves_fine_tuned,
        )
        result = build_or_call_result(deployment=deployment, start=start, end=end)
        log(
            f"  {deployment.name}: {written} hours of traffic written, API {chosen or 'none'}, "
            f"verdict {result.verdict} (margin {result.monthly_margin or Decimal(0):.2f} a month)"
        )
