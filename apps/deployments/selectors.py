from django.db.models import QuerySet

from apps.accounts.selectors import (
    deployments_visible_to,
    experiments_visible_to,
    models_visible_to,
)
from apps.experiments.models import Experiment

from .models import Deployment, DeploymentResource, Model


def model_experiments(*, model: Model, user) -> QuerySet[Experiment]:
    """The runs that produced the model, among those the user may see (a run of another team's
    project may have produced it)."""
    return (
        experiments_visible_to(user=user)
        .filter(model=model)
        .select_related("project")
        .order_by("-started_at", "-pk")
    )


def model_deployments(*, model: Model, user) -> QuerySet[Deployment]:
    """The deployments that serve the model, among those the user may see."""
    return (
        deployments_visible_to(user=user)
        .filter(model=model)
        .select_related("project")
        .order_by("name")
    )


def deployment_resources(*, deployment: Deployment) -> QuerySet[DeploymentResource]:
    return deployment.resources.order_by("resource_id", "started_at")


def deployment_model_for_user(*, deployment: Deployment, user) -> Model | None:
    """The served model, if the user may see it (it may belong to another team's project)."""
    return models_visible_to(user=user).filter(pk=deployment.model_id).first()
