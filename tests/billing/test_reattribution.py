"""A new tag key alias, allocation rule or registered resource re-attributes the history it
touches, rollups included, to the cent."""

from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, DailyResourceCost
from apps.billing.services import attribution_refresh, attribution_schedule
from apps.experiments.models import ExperimentResource
from apps.projects.models import AllocationRule, TagKeyAlias
from apps.spend.selectors import spend_totals

from .conftest import focus_line, run_import, when, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture
def history(acme, tmp_path):
    run = run_import(
        write_focus(
            tmp_path / "january.csv",
            [
                focus_line(
                    Tags='{"team-project": "vision"}', EffectiveCost="6.00", BilledCost="6.00"
                ),
                focus_line(
                    ResourceId="i-late",
                    EffectiveCost="1.000000000000001",
                    BilledCost="1.000000000000001",
                ),
                focus_line(
                    ResourceId="i-late",
                    ChargePeriodStart="2025-01-25T00:00:00Z",
                    ChargePeriodEnd="2025-01-25T01:00:00Z",
                    EffectiveCost="2.00",
                    BilledCost="2.00",
                ),
                focus_line(
                    SubAccountId="555555555555",
                    ServiceCategory="Networking",
                    EffectiveCost="0.40",
                    BilledCost="0.40",
                ),
            ],
        )
    )
    assert run.status == "succeeded"
    return acme


def by_project() -> dict:
    return {t.key[0]: t.effective_cost for t in spend_totals(by=("project_id",))}


def by_owner() -> dict:
    return {t.key: t.effective_cost for t in spend_totals(by=("experiment_id", "workload"))}


def test_before_anything_is_registered_all_is_unattributed(history):
    assert by_project() == {None: Decimal("9.400000000000001")}


def test_a_new_alias_re_attributes_the_lines_its_key_tags(history):
    TagKeyAlias.objects.create(dimension="project", key="Team-Project")

    changed = attribution_refresh()

    assert changed == 1
    assert by_project() == {history.vision.pk: Decimal("6.00"), None: Decimal("3.400000000000001")}
    line = CostLineItem.objects.get(source_row=2)
    assert (line.project_id, line.workload, line.attributed_by) == (
        history.vision.pk,
        "other",
        "tag",
    )


def test_a_new_rule_claims_what_nothing_else_reached(history):
    AllocationRule.objects.create(
        name="network",
        field="sub_account_id",
        pattern="5555*",
        project=history.search,
        workload="network",
    )

    assert attribution_refresh() == 1

    assert by_project()[history.search.pk] == Decimal("0.40")
    assert by_owner()[(None, "network")] == Decimal("0.40")


def test_a_newly_registered_resource_re_attributes_its_lines_in_time(history):
    ExperimentResource.objects.create(experiment=history.resnet, resource_id="i-late")

    changed = attribution_refresh(resource_ids=["i-late"])

    # resnet ran until 20 January: the line of the 25th is not its own.
    assert changed == 1
    assert by_owner()[(history.resnet.pk, "training")] == Decimal("1.000000000000001")
    assert by_project() == {
        history.vision.pk: Decimal("1.000000000000001"),
        None: Decimal("8.40"),
    }
    assert sorted(
        DailyResourceCost.objects.filter(resource_id="i-late").values_list(
            "day", "experiment_id", "effective_cost"
        )
    ) == [
        (when("2025-01-02T00:00:00").date(), history.resnet.pk, Decimal("1.000000000000001")),
        (when("2025-01-25T00:00:00").date(), None, Decimal("2.00")),
    ]


def test_a_second_run_on_the_same_machine_splits_the_line_and_leaving_merges_it(history):
    ExperimentResource.objects.create(experiment=history.resnet, resource_id="i-late")
    attribution_refresh(resource_ids=["i-late"])
    shared = ExperimentResource.objects.create(experiment=history.evaluation, resource_id="i-late")

    attribution_refresh(resource_ids=["i-late"])

    parts = CostLineItem.objects.filter(source_row=3).order_by("-effective_cost")
    assert [(p.experiment_id, p.effective_cost) for p in parts] == [
        (history.resnet.pk, Decimal("0.800000000000001")),
        (history.evaluation.pk, Decimal("0.200000000000000")),
    ]
    # The evaluation ran until the 31st: the line of the 25th is all its own.
    assert by_project() == {
        history.vision.pk: Decimal("0.800000000000001"),
        history.nlp.pk: Decimal("2.200000000000000"),
        None: Decimal("6.40"),
    }

    shared.delete()
    attribution_refresh(resource_ids=["i-late"])

    assert list(
        CostLineItem.objects.filter(source_row=3).values_list(
            "experiment_id", "effective_cost", "billed_cost"
        )
    ) == [(history.resnet.pk, Decimal("1.000000000000001"), Decimal("1.000000000000001"))]
    assert by_project() == {
        history.vision.pk: Decimal("1.000000000000001"),
        None: Decimal("8.40"),
    }


def test_nothing_changes_when_nothing_would(history):
    assert attribution_refresh() == 0
    assert attribution_refresh(resource_ids=["i-nobody-knows"]) == 0


def test_scheduling_runs_the_refresh_after_the_commit(
    history, eager_celery, django_capture_on_commit_callbacks
):
    TagKeyAlias.objects.create(dimension="project", key="team-project")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        attribution_schedule()
        assert by_project()[None] == Decimal("9.400000000000001")  # not before the commit

    # The re-attribution, then what its "spend data changed" enqueued: the findings' recompute
    # and the digests' alerts check (the recompute moves the findings version in a row, in its
    # transaction: no callback).
    assert len(callbacks) == 3
    assert by_project()[history.vision.pk] == Decimal("6.00")


def test_scheduling_no_resource_ids_schedules_nothing(history, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        attribution_schedule(resource_ids=["", "  "])

    assert callbacks == []
