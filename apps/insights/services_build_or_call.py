"""Writes of build or call: a lead saves a deployment's inputs."""

from decimal import Decimal

from django.db import transaction

from apps.deployments.models import Deployment

from .models import BuildOrCallInputs


@transaction.atomic
def build_or_call_inputs_save(
    *,
    deployment: Deployment,
    by,
    api_model: str = "",
    api_serves_fine_tuned: bool = False,
    expected_requests_per_hour: Decimal | None = None,
    engineering_hours_per_month: Decimal | None = None,
    capacity_per_replica_hour: Decimal | None = None,
    latency_objective_ms: int | None = None,
    open_weights: bool = False,
    model_memory_gb: Decimal | None = None,
) -> BuildOrCallInputs:
    """Store the inputs (None: back to the default). One row per deployment."""
    inputs, _ = BuildOrCallInputs.objects.update_or_create(
        deployment=deployment,
        defaults={
            "api_model": api_model,
            "api_serves_fine_tuned": api_serves_fine_tuned,
            "expected_requests_per_hour": expected_requests_per_hour,
            "engineering_hours_per_month": engineering_hours_per_month,
            "capacity_per_replica_hour": capacity_per_replica_hour,
            "latency_objective_ms": latency_objective_ms,
            "open_weights": open_weights,
            "model_memory_gb": model_memory_gb,
            "updated_by": by,
        },
    )
    return inputs
