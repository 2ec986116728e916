"""GPU compute that a claim or an allocation rule gives a project without saying what for counts as
the project's usual workload (most of its registered runs and deployments), not "other"; a
workload the claim or rule names wins, and other cost kinds keep theirs."""

from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem
from apps.billing.services import attribution_refresh
from apps.experiments.models import Experiment
from apps.projects.models import AllocationRule, usual_workload

from .conftest import focus_line, run_import, when, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])
D = Decimal


def test_the_usual_workload_is_what_most_registrations_are_ties_to_training_first():
    assert usual_workload(["inference", "training", "inference", "development"]) == "inference"
    assert usual_workload(["fine_tuning", "training"]) == "training"
    assert usual_workload(["development", "inference"]) == "inference"
    assert usual_workload(["storage", "other"]) is None
    assert usual_workload([]) is None


@pytest.fixture
def stray(acme, tmp_path):
    """Nobody's: a GPU box (p4d), a CPU box (m6i) and a bucket, one line each."""
    run = run_import(
        write_focus(
            tmp_path / "january.csv",
            [
                focus_line(ResourceId="i-gpu", x_UsageType="BoxUsage:p4d.24xlarge",
                           EffectiveCost="32.77", BilledCost="32.77"),
                focus_line(ResourceId="i-cpu", x_UsageType="BoxUsage:m6i.xlarge",
                           EffectiveCost="0.19", BilledCost="0.19"),
                focus_line(ResourceId="arn:aws:s3:::stray", ServiceCategory="Storage",
                           ServiceName="Amazon Simple Storage Service",
                           EffectiveCost="0.50", BilledCost="0.50"),
            ],
        )
    )  # fmt: skip
    assert run.status == "succeeded", run.error
    assert dict(CostLineItem.objects.values_list("resource_id", "cost_kind")) == {
        "i-gpu": "gpu_compute",
        "i-cpu": "cpu_compute",
        "arn:aws:s3:::stray": "storage",
    }
    return acme


def _rule(project, field="resource_id", pattern="*", workload="", **owner) -> AllocationRule:
    return AllocationRule.objects.create(
        name="claimed", field=field, pattern=pattern, project=project, workload=workload, **owner
    )


def workloads() -> dict:
    return dict(CostLineItem.objects.values_list("resource_id", "workload"))


def test_gpu_compute_a_rule_gives_a_project_counts_as_its_usual_workload(stray):
    # Vision registered a training run, a notebook and a deployment: a tie, training first; a
    # second notebook makes development the usual workload.
    _rule(stray.vision, pattern="i-*")
    _rule(stray.vision, pattern="arn:*")

    attribution_refresh()

    assert workloads() == {"i-gpu": "training", "i-cpu": "other", "arn:aws:s3:::stray": "storage"}

    Experiment.objects.create(
        project=stray.vision, name="second-notebook", kind=Experiment.Kind.NOTEBOOK, gpu_count=1
    )
    attribution_refresh()

    assert workloads()["i-gpu"] == "development"
    line = CostLineItem.objects.get(resource_id="i-gpu")
    assert (line.project_id, line.experiment_id, line.attributed_by) == (
        stray.vision.pk,
        None,
        "rule",
    )
    assert line.effective_cost == D("32.77")


def test_a_workload_the_rule_names_wins_and_a_project_with_no_registrations_reads_other(stray):
    _rule(stray.nlp, pattern="i-gpu", workload="inference")
    _rule(stray.search, pattern="*")

    attribution_refresh()

    assert workloads() == {"i-gpu": "inference", "i-cpu": "other", "arn:aws:s3:::stray": "storage"}
    search = CostLineItem.objects.get(resource_id="i-cpu")
    assert search.project_id == stray.search.pk


def test_a_rule_to_a_run_keeps_the_runs_workload_whatever_the_project_does(stray):
    _rule(stray.vision, pattern="i-gpu", experiment=stray.notebook)

    attribution_refresh()

    line = CostLineItem.objects.get(resource_id="i-gpu")
    assert (line.experiment_id, line.workload) == (stray.notebook.pk, "development")
    assert when("2025-01-01T00:00:00") <= line.charge_period_start


def test_the_claim_and_the_project_page_say_what_gpu_compute_counts_as(
    stray, client, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from costsite.celery import app
    from tests.factories import StaffFactory

    client.force_login(StaffFactory())
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                reverse("unattributed_claim"),
                {"resource_id": "i-gpu", "target": f"project:{stray.vision.pk}"},
                follow=True,
            )
            other = client.post(
                reverse("unattributed_claim"),
                {"resource_id": "i-cpu", "target": f"project:{stray.search.pk}"},
                follow=True,
            )
    finally:
        app.conf.task_always_eager = False

    assert (
        "Assigned i-gpu to the project “Vision”: $32.77 of unattributed spend moves there, all "
        "history included. The pages show it once re-attribution has run. Its GPU compute is "
        "counted as training: the project&#x27;s usual workload." in response.content.decode()
    )
    assert (
        "Its GPU compute is counted as other: the project has no registered runs or deployments "
        "to take a usual workload from (choose a workload to say what it is for)."
        in other.content.decode().replace("&#x27;", "'")
    )
    assert workloads()["i-gpu"] == "training"
    page = client.get(reverse("project_detail", args=["vision"])).content.decode()
    assert (
        '<p class="muted" id="usual-workload">GPU compute that an allocation rule gives this '
        "project without a workload is counted as training: the project's usual workload "
        "(that of most of its registered runs and deployments).</p>" in page
    )
    search = client.get(reverse("project_detail", args=["search"])).content.decode()
    assert (
        "is counted as other: the project has no registered runs or deployments to take a usual "
        "workload from.</p>" in search
    )
    nlp = client.get(reverse("project_detail", args=["nlp"])).content.decode()
    assert 'id="usual-workload"' not in nlp
