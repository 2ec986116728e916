"""The demo's inference levers: what its deployments' owners know and neither the bill nor the
metrics say, set through the deployments' service as a lead would on the deployment's page.

- `seg-batch-nightly` and `shelf-audit-nightly` (nightly batches) start in two or three minutes
  and have no latency objective: scaling to zero between their runs is allowed (scale_to_zero).
- `support-llm-8b` takes 90 s to load its 8B model against a 1.5 s objective: no scale to zero
  for it, though it serves nobody at night (the lever's must-not-fire case, on the real demo).
- `defect-vit-edge` starts in 45 s against its 120 ms objective: the same.
- `embedder-api` embeds documents for the search index: nobody waits on them, the objective is
  four hours, so it could be served in batch (batch_not_realtime).

The other levers follow from the bill, traffic and metrics the earlier steps wrote: repeated
requests (cache_repeats), replicas busy little under steady traffic (batch_requests), large
GPUs holding a small model (right_size_serving), and the next smaller API model of the one each
build-or-call page compares with (smaller_model). The findings recompute after the steps finds
them.
"""

from collections.abc import Callable
from pathlib import Path

from apps.deployments.models import Deployment
from apps.deployments.services import deployment_update

HOUR_MS = 3_600_000
TRAITS: dict[str, dict] = {
    "seg-batch-nightly": {"cold_start_seconds": 180},
    "shelf-audit-nightly": {"cold_start_seconds": 120},
    "similar-items-batch": {"cold_start_seconds": 120},
    "support-llm-8b": {"cold_start_seconds": 90},
    "defect-vit-edge": {"cold_start_seconds": 45},
    "embedder-api": {"cold_start_seconds": 60, "latency_objective_ms": 4 * HOUR_MS},
}


def demo_levers_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """`directory` is unused: the traits are a lead's edits, not a file."""
    changed = 0
    for deployment in Deployment.objects.filter(name__in=TRAITS).order_by("name"):
        traits = TRAITS[deployment.name]
        if any(getattr(deployment, field) != value for field, value in traits.items()):
            deployment_update(deployment=deployment, **traits)
            changed += 1
    log(f"Inference levers: cold starts and objectives of {changed} deployment(s) set.")
