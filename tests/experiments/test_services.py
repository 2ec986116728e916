from datetime import UTC, datetime

import pytest

from apps.experiments.models import Experiment
from apps.experiments.services import _resources_replace, experiment_create, experiment_update
from tests.factories import ExperimentFactory, ExperimentResourceFactory

pytestmark = pytest.mark.django_db


def test_replacing_resource_ids_returns_exactly_those_added_or_removed():
    experiment = ExperimentFactory()
    ExperimentResourceFactory(experiment=experiment, resource_id="i-a")
    ExperimentResourceFactory(experiment=experiment, resource_id="i-b")
    changed = _resources_replace(experiment=experiment, resource_ids=["i-b", "i-c", "i-c"])
    assert changed == {"i-a", "i-c"}
    assert sorted(experiment.resources.values_list("resource_id", flat=True)) == ["i-b", "i-c"]
    assert _resources_replace(experiment=experiment, resource_ids=["i-c", "i-b"]) == set()


def test_creating_an_experiment_registers_its_resources(project, member):
    experiment = experiment_create(
        project=project, name="probe", resource_ids=["i-1", "i-2"], created_by=member
    )
    assert experiment.status == Experiment.Status.PLANNED
    assert sorted(experiment.resources.values_list("resource_id", flat=True)) == ["i-1", "i-2"]


def test_a_partial_update_changes_only_what_it_names_and_leaves_resources_alone():
    experiment = ExperimentFactory(status=Experiment.Status.RUNNING, ended_at=None, gpu_count=4)
    ExperimentResourceFactory(experiment=experiment, resource_id="i-1")
    end = datetime(2025, 3, 2, tzinfo=UTC)
    experiment_update(experiment=experiment, status=Experiment.Status.FAILED, ended_at=end)
    experiment.refresh_from_db()
    assert (experiment.status, experiment.ended_at, experiment.gpu_count) == ("failed", end, 4)
    assert list(experiment.resources.values_list("resource_id", flat=True)) == ["i-1"]


def test_an_update_refuses_fields_it_does_not_know():
    experiment = ExperimentFactory()
    with pytest.raises(
        TypeError, match=r"^experiment_update\(\) cannot change created_at, project$"
    ):
        experiment_update(experiment=experiment, project=None, created_at=None)
