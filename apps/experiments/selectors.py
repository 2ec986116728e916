from django.db.models import QuerySet

from apps.accounts.selectors import models_visible_to
from apps.deployments.models import Model

from .models import Experiment, ExperimentResource


def experiment_resources(*, experiment: Experiment) -> QuerySet[ExperimentResource]:
    return experiment.resources.order_by("resource_id", "started_at")


def experiment_model_for_user(*, experiment: Experiment, user) -> Model | None:
    """The model the run produces, if the user may see it: a run may produce a model of another
    team's project, and its name is then not ours to show."""
    if experiment.model_id is None:
        return None
    return models_visible_to(user=user).filter(pk=experiment.model_id).first()
