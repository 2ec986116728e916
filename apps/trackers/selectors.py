from decimal import Decimal

from django.db.models import QuerySet, Sum

from apps.experiments.models import Experiment
from apps.spend.selectors import experiment_scope

from .models import TrackedRun, TrackerSource


def run_cost(*, experiment: Experiment, currency: str) -> Decimal:
    """The run's spend over its whole life in `currency`: what billing attributed to it, its
    resources' lines matched in time and, where runs shared a resource at once, split by GPU
    count (apps/billing/attribution.py)."""
    scope = experiment_scope(experiment=experiment, currency=currency)
    total = scope.daily().filter(billing_currency=currency).aggregate(total=Sum("effective_cost"))
    return total["total"] or Decimal("0")


def tracker_sources() -> QuerySet[TrackerSource]:
    return TrackerSource.objects.select_related("default_project").order_by("name")


def tracked_run_for(*, experiment: Experiment) -> TrackedRun | None:
    return TrackedRun.objects.filter(experiment=experiment).select_related("source").first()
