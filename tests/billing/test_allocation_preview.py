"""The allocation page's preview is exact: what it says a rule or an alias change would move,
from whom and to whom, is what saving the change then moves, Decimal for Decimal.

Every case previews an unsaved change, saves it through the projects' services (which schedule
the tracked re-attribution), runs that re-attribution, and compares three figures: the preview,
what the run recorded as moved, and the spend per project before and after in the rollups.
"""

import copy
from collections import defaultdict
from decimal import Decimal

import pytest
import time_machine
from django.db import connection, transaction
from django.db.models.functions import Upper

from apps.billing.attribution import Attributor
from apps.billing.models import AttributionRun, CostLineItem
from apps.billing.selectors_allocation import (
    Movement,
    attribution_run_movement,
    movement_from_rows,
)
from apps.billing.services import (
    attribution_dry_run,
    attribution_run_execute,
    unreached_dry_run,
)
from apps.billing.services_allocation import (
    _rule_lines,
    allocation_rule_delete_preview,
    allocation_rule_preview,
    tag_key_alias_preview,
)
from apps.experiments import services as experiment_services
from apps.experiments.models import ExperimentResource
from apps.projects import services as project_services
from apps.projects.models import AllocationRule, TagKeyAlias
from apps.spend.selectors import spend_totals

from .conftest import focus_line, run_import, when, write_focus
from .formats import api_pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

# 20 February 2025: the last 30 days start on 21 January.
TODAY = when("2025-02-20T12:00:00")


@pytest.fixture(autouse=True)
def today():
    with time_machine.travel(TODAY, tick=False):
        yield


@pytest.fixture
def history(acme, tmp_path):
    """An existing rule gives sub-account 555555555555 to Language; the rest is tagged, or
    nobody's.

    row  resource    sub-account   service       tags                 cost
    2    i-tagged    222222222222  EC2           team-project=vision  6.00
    3    vol-data-1  222222222222  EBS                                1.000000000000001
    4    vol-data-2  222222222222  EBS (25 Jan)                       2.50
    5    nat-1       555555555555  EBS                                0.40
    6    nat-2       555555555555  VPC                                0.35
    7    i-other     222222222222  EC2, in EUR                        3.00
    """
    AllocationRule.objects.create(
        name="network account",
        field="sub_account_id",
        pattern="5555*",
        priority=100,
        project=acme.nlp,
        workload="network",
    )
    ebs = "Amazon Elastic Block Store"
    run = run_import(
        write_focus(
            tmp_path / "january.csv",
            [
                focus_line(
                    ResourceId="i-tagged",
                    Tags='{"team-project": "vision"}',
                    EffectiveCost="6.00",
                    BilledCost="6.00",
                ),
                focus_line(
                    ResourceId="vol-data-1",
                    ServiceName=ebs,
                    EffectiveCost="1.000000000000001",
                    BilledCost="1.000000000000001",
                ),
                focus_line(
                    ResourceId="vol-data-2",
                    ServiceName=ebs,
                    ChargePeriodStart="2025-01-25T00:00:00Z",
                    ChargePeriodEnd="2025-01-25T01:00:00Z",
                    EffectiveCost="2.50",
                    BilledCost="2.50",
                ),
                focus_line(
                    ResourceId="nat-1",
                    SubAccountId="555555555555",
                    ServiceName=ebs,
                    EffectiveCost="0.40",
                    BilledCost="0.40",
                ),
                focus_line(
                    ResourceId="nat-2",
                    SubAccountId="555555555555",
                    ServiceName="Amazon Virtual Private Cloud",
                    EffectiveCost="0.35",
                    BilledCost="0.35",
                ),
                focus_line(
                    ResourceId="i-other",
                    BillingCurrency="EUR",
                    EffectiveCost="3.00",
                    BilledCost="3.00",
                ),
            ],
        )
    )
    assert run.status == "succeeded", run.error
    return acme


def by_project() -> dict:
    return {
        (t.key[0], t.key[1]): t.effective_cost
        for t in spend_totals(by=("project_id", "billing_currency"))
    }


def figures(movement: Movement) -> dict:
    out = {"from": {}, "to": {}}
    for direction, shares in (("from", movement.sources), ("to", movement.targets)):
        for share in shares:
            out[direction][(share.label, share.currency)] = (
                share.amount,
                share.recent,
                share.lines,
            )
    return out


def deltas(before: dict, after: dict) -> dict:
    changed = defaultdict(Decimal)
    for key in {*before, *after}:
        delta = after.get(key, Decimal(0)) - before.get(key, Decimal(0))
        if delta:
            changed[key] = delta
    return dict(changed)


def preview_deltas(movement: Movement, projects: dict) -> dict:
    changed = defaultdict(Decimal)
    for sign, shares in ((-1, movement.sources), (1, movement.targets)):
        for share in shares:
            key = (share.project.pk if share.project else None, share.currency)
            changed[key] += sign * share.amount
    return {key: amount for key, amount in changed.items() if amount}


def save_and_run(save, django_capture_on_commit_callbacks) -> AttributionRun:
    with django_capture_on_commit_callbacks(execute=False):
        saved = save()
    run = saved.run
    assert run.status == AttributionRun.Status.QUEUED
    return attribution_run_execute(attribution_run=run)


def test_a_rule_that_claims_only_unattributed_spend(history, django_capture_on_commit_callbacks):
    rule = AllocationRule(
        name="volumes",
        field="service_name",
        pattern="amazon elastic block*",
        priority=100,
        project=history.search,
        workload="storage",
    )
    before = by_project()

    preview = allocation_rule_preview(rule=rule)

    # nat-1 is EBS too, but the existing rule (older, same priority) keeps it.
    assert figures(preview) == {
        "from": {("Unattributed", "USD"): (Decimal("3.500000000000001"), Decimal("2.50"), 2)},
        "to": {("Search", "USD"): (Decimal("3.500000000000001"), Decimal("2.50"), 2)},
    }
    assert preview.totals == {"USD": Decimal("3.500000000000001")}
    assert preview.recent_totals == {"USD": Decimal("2.50")}
    assert preview.lines == 2
    assert not AllocationRule.objects.filter(name="volumes").exists()  # nothing saved

    run = save_and_run(
        lambda: project_services.allocation_rule_create(
            name="volumes",
            field="service_name",
            pattern="amazon elastic block*",
            priority=100,
            project=history.search,
            workload="storage",
        ),
        django_capture_on_commit_callbacks,
    )

    assert run.status == AttributionRun.Status.SUCCEEDED
    assert run.lines_changed == 2
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert (
        deltas(before, by_project())
        == preview_deltas(preview, {})
        == {
            (None, "USD"): Decimal("-3.500000000000001"),
            (history.search.pk, "USD"): Decimal("3.500000000000001"),
        }
    )


def test_a_rule_of_higher_priority_takes_spend_from_the_rule_that_had_it(
    history, django_capture_on_commit_callbacks
):
    values = {
        "name": "NAT gateways",
        "field": "resource_id",
        "pattern": "NAT-*",
        "priority": 10,
        "project": history.vision,
        "experiment": history.resnet,
    }
    before = by_project()

    preview = allocation_rule_preview(rule=AllocationRule(**values))

    assert figures(preview) == {
        "from": {("Language", "USD"): (Decimal("0.75"), Decimal("0"), 2)},
        "to": {("Vision · experiment resnet-baseline", "USD"): (Decimal("0.75"), Decimal("0"), 2)},
    }

    run = save_and_run(
        lambda: project_services.allocation_rule_create(**values),
        django_capture_on_commit_callbacks,
    )

    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert deltas(before, by_project()) == preview_deltas(preview, {})
    line = CostLineItem.objects.get(resource_id="nat-2")
    assert (line.project_id, line.experiment_id, line.workload, line.attributed_by) == (
        history.vision.pk,
        history.resnet.pk,
        "training",
        "rule",
    )


def test_a_rule_changed_and_deleted_gives_back_what_it_had(
    history, django_capture_on_commit_callbacks
):
    rule = AllocationRule.objects.get(name="network account")
    changed = AllocationRule.objects.get(pk=rule.pk)
    changed.pattern = "*"
    changed.field = "resource_id"
    before = by_project()

    preview = allocation_rule_preview(rule=changed, original=rule)

    # Everything untagged moves to Language, in both currencies; the tagged line stays nobody's
    # (no alias reads team-project yet) but is reached by the rule too.
    assert figures(preview)["from"] == {
        ("Unattributed", "EUR"): (Decimal("3.00"), Decimal("0"), 1),
        ("Unattributed", "USD"): (Decimal("9.500000000000001"), Decimal("2.50"), 3),
    }
    run = save_and_run(
        lambda: project_services.allocation_rule_update(
            rule=rule,
            name=rule.name,
            field="resource_id",
            pattern="*",
            priority=rule.priority,
            project=rule.project,
            workload=rule.workload,
        ),
        django_capture_on_commit_callbacks,
    )
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert deltas(before, by_project()) == preview_deltas(preview, {})

    rule.refresh_from_db()
    before = by_project()
    preview = allocation_rule_delete_preview(rule=rule)
    assert figures(preview)["to"] == {
        ("Unattributed", "EUR"): (Decimal("3.00"), Decimal("0"), 1),
        ("Unattributed", "USD"): (Decimal("10.250000000000001"), Decimal("2.50"), 5),
    }
    run = save_and_run(
        lambda: project_services.allocation_rule_delete(rule=rule),
        django_capture_on_commit_callbacks,
    )
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert deltas(before, by_project()) == preview_deltas(preview, {})


def test_a_pattern_that_matches_nothing_moves_nothing(history):
    preview = allocation_rule_preview(
        rule=AllocationRule(
            name="nothing",
            field="resource_id",
            pattern="arn:aws:s3:::nobody-*",
            project=history.nlp,
        )
    )

    assert preview.is_empty
    assert preview.lines == 0
    assert preview.totals == {}


def test_a_rule_never_takes_spend_that_tags_reached(history):
    TagKeyAlias.objects.create(dimension="project", key="team-project")
    history_line = CostLineItem.objects.get(resource_id="i-tagged")
    history_line.project_id, history_line.attributed_by = history.vision.pk, "tag"
    history_line.save()

    preview = allocation_rule_preview(
        rule=AllocationRule(
            name="instances", field="resource_id", pattern="i-tagged", project=history.nlp
        )
    )

    assert preview.is_empty


def test_a_new_alias_moves_the_spend_its_key_tags(history, django_capture_on_commit_callbacks):
    before = by_project()

    preview = tag_key_alias_preview(alias=TagKeyAlias(dimension="project", key=" Team-Project "))

    assert figures(preview) == {
        "from": {("Unattributed", "USD"): (Decimal("6.00"), Decimal("0"), 1)},
        "to": {("Vision", "USD"): (Decimal("6.00"), Decimal("0"), 1)},
    }
    run = save_and_run(
        lambda: project_services.tag_key_alias_create(dimension="project", key=" Team-Project "),
        django_capture_on_commit_callbacks,
    )
    assert run.reason == "Tag key alias “Team-Project” for the project added"
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert deltas(before, by_project()) == preview_deltas(preview, {})


def test_an_alias_changed_to_another_dimension_moves_its_spend_back(
    history, django_capture_on_commit_callbacks
):
    saved = project_services.tag_key_alias_create(dimension="project", key="team-project")
    attribution_run_execute(attribution_run=saved.run)
    alias = saved.subject
    changed = TagKeyAlias.objects.get(pk=alias.pk)
    changed.dimension = "experiment"  # "vision" names no experiment
    before = by_project()

    preview = tag_key_alias_preview(alias=changed, original=alias)

    assert figures(preview) == {
        "from": {("Vision", "USD"): (Decimal("6.00"), Decimal("0"), 1)},
        "to": {("Unattributed", "USD"): (Decimal("6.00"), Decimal("0"), 1)},
    }
    run = save_and_run(
        lambda: project_services.tag_key_alias_update(
            alias=alias, dimension="experiment", key="team-project"
        ),
        django_capture_on_commit_callbacks,
    )
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert deltas(before, by_project()) == preview_deltas(preview, {})


def test_an_alias_change_that_reaches_too_many_lines_is_not_previewed(history, monkeypatch):
    monkeypatch.setattr("apps.billing.services_allocation.PREVIEW_MAX_LINES", 0)

    preview = tag_key_alias_preview(alias=TagKeyAlias(dimension="project", key="team-project"))

    # One line has the key: more than the cap.
    assert (preview.too_many_lines, preview.lines, preview.is_empty) == (1, 0, False)


def test_a_rule_preview_has_no_cap(history, monkeypatch):
    monkeypatch.setattr("apps.billing.services_allocation.PREVIEW_MAX_LINES", 0)

    preview = allocation_rule_preview(
        rule=AllocationRule(name="all", field="resource_id", pattern="*", project=history.nlp)
    )

    # All six lines are the rules' (the tagged one too: no alias reads team-project yet); the
    # two of the older network rule stay with it.
    assert (preview.too_many_lines, preview.lines) == (0, 4)
    assert preview.totals == {"USD": Decimal("9.500000000000001"), "EUR": Decimal("3.00")}


@pytest.fixture
def mixed(acme, tmp_path):
    """Lines of every kind the rules look at: GPU and CPU boxes, storage, network, a model API's
    requests (through a key nobody mapped), in two currencies and both sides of the last 30 days;
    a box registered by a run, also outside the run's window, one shared by two runs; a tagged
    line, and rules already there."""
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-gpu-1")
    ExperimentResource.objects.create(experiment=acme.finetune, resource_id="i-shared")
    ExperimentResource.objects.create(experiment=acme.evaluation, resource_id="i-shared")
    AllocationRule.objects.create(
        name="boxes", field="resource_id", pattern="i-*", priority=50, project=acme.search
    )
    AllocationRule.objects.create(
        name="payer", field="billing_account_id", pattern="9*", priority=90, project=acme.nlp
    )
    lines = []
    for n, (day, resource, extra) in enumerate(
        [
            ("2025-01-02", "i-gpu-1", {"x_UsageType": "BoxUsage:p4d.24xlarge"}),
            ("2025-01-25", "i-gpu-1", {"x_UsageType": "BoxUsage:p4d.24xlarge"}),  # after run
            ("2025-01-03", "i-shared", {"x_UsageType": "BoxUsage:p4d.24xlarge"}),
            ("2025-01-04", "i-gpu-2", {"x_UsageType": "BoxUsage:p4d.24xlarge"}),
            ("2025-01-24", "i-gpu-2", {"x_UsageType": "BoxUsage:p4d.24xlarge"}),
            ("2025-01-24", "i-cpu", {"x_UsageType": "BoxUsage:m6i.xlarge"}),
            ("2025-01-05", "i-cpu", {"BillingCurrency": "EUR"}),
            ("2025-01-06", "vol-1", {"ServiceCategory": "Storage", "ServiceName": "EBS"}),
            ("2025-01-26", "vol-1", {"ServiceCategory": "Storage", "ServiceName": "EBS"}),
            ("2025-01-07", "nat-1", {"ServiceCategory": "Networking", "ServiceName": "VPC"}),
            ("2025-01-08", "nat-1", {"BillingAccountId": "999999999999"}),
            ("2025-01-09", "i-tagged", {"Tags": '{"ml-project": "vision"}'}),
            ("2025-01-10", "job-1", {"SubAccountId": "333333333333", "ServiceName": "Batch"}),
            # The first moment of the last 30 days (TODAY less 30 days), and the one before.
            ("2025-01-21", "edge-1", {"ChargePeriodStart": "2025-01-21T12:00:00Z"}),
            ("2025-01-21", "edge-1", {"ChargePeriodStart": "2025-01-21T11:59:59Z"}),
        ]
    ):
        cost = f"{n + 1}.{n:02}0000000000001"
        values = {
            "ResourceId": resource,
            "ChargePeriodStart": f"{day}T{n:02}:00:00Z",
            "ChargePeriodEnd": f"{day}T{n:02}:30:00Z",
            "EffectiveCost": cost,
            "BilledCost": cost,
        }
        values.update(extra)
        lines.append(focus_line(**values))
    run = run_import(write_focus(tmp_path / "mixed.csv", lines))
    assert run.status == "succeeded", run.error
    rows = api_pages.litellm_rows()
    for row in rows:
        row["request_tags"] = "[]"
    run = run_import(api_pages.write_litellm_csv(tmp_path / "requests.csv", rows))
    assert run.status == "succeeded", run.error
    assert set(CostLineItem.objects.values_list("cost_kind", "attributed_by")) == {
        ("gpu_compute", "resource"),
        ("gpu_compute", "rule"),
        ("cpu_compute", "rule"),
        ("cpu_compute", "tag"),
        ("cpu_compute", ""),
        ("storage", ""),
        ("network", ""),
        ("model_api", ""),
    }
    return acme


RULE_CHANGES = {
    "catch-all, highest priority": dict(field="resource_id", pattern="*", priority=1),
    "volumes, lowest": dict(field="resource_id", pattern="VOL-?", priority=200),
    "nothing: boxes the older rule keeps": dict(field="resource_id", pattern="i-*2", priority=200),
    "a service, as a deployment": dict(field="service_name", pattern="?at*", priority=10),
    "a sub-account, with a class": dict(field="sub_account_id", pattern="[2p]*", priority=70),
    "nothing: no such account": dict(field="billing_account_id", pattern="0*", priority=1),
    "the two sides of the last 30 days": dict(field="resource_id", pattern="edge-?", priority=5),
}


@pytest.mark.parametrize("change", sorted(RULE_CHANGES))
def test_a_rule_preview_moves_what_the_line_by_line_dry_run_moves(mixed, change):
    values = {"name": change, "project": mixed.vision, **RULE_CHANGES[change]}
    if "deployment" in change:
        values["deployment"] = mixed.ranker
    rule = AllocationRule(**values)
    narrow = _rule_lines([rule])

    def attributor_with(rule):
        with transaction.atomic():
            rule.save()
            attributor = Attributor.load()
            transaction.set_rollback(True)
        return attributor

    attributor = attributor_with(copy.copy(rule))
    summed = unreached_dry_run(attributor=attributor, narrow=narrow)
    line_by_line = attribution_dry_run(attributor=attributor, narrow=narrow)

    assert (summed.as_json(), summed.lines) == (line_by_line.as_json(), line_by_line.lines)
    assert figures(allocation_rule_preview(rule=rule)) == figures(
        movement_from_rows(line_by_line.as_json(), lines=line_by_line.lines)
    )
    # Every case but the two "nothing" moves something, so the comparison is not empty.
    assert (line_by_line.lines > 0) == (not change.startswith("nothing"))


@pytest.mark.parametrize("name", ["boxes", "payer"])
def test_a_rule_deleted_moves_what_the_line_by_line_dry_run_moves(mixed, name):
    rule = AllocationRule.objects.get(name=name)
    with transaction.atomic():
        copy.copy(rule).delete()
        attributor = Attributor.load()
        transaction.set_rollback(True)
    narrow = _rule_lines([rule])

    summed = unreached_dry_run(attributor=attributor, narrow=narrow)
    line_by_line = attribution_dry_run(attributor=attributor, narrow=narrow)

    assert line_by_line.lines > 0
    assert (summed.as_json(), summed.lines) == (line_by_line.as_json(), line_by_line.lines)


# Facts that change without a re-attribution of their own: the preview sees them as the run will.


def test_a_project_created_since_the_bill_takes_what_its_tags_name_in_the_preview_too(
    mixed, tmp_path, django_capture_on_commit_callbacks
):
    run = run_import(
        write_focus(
            tmp_path / "late.csv",
            [
                focus_line(
                    BillingAccountId="777777777777",
                    ResourceId="late-1",
                    Tags='{"project": "late"}',
                    EffectiveCost="5.00",
                    BilledCost="5.00",
                )
            ],
        )
    )
    assert run.status == "succeeded", run.error
    assert CostLineItem.objects.get(resource_id="late-1").attributed_by == ""
    project_services.project_create(team=mixed.team, name="Late", slug="late")
    values = {"name": "late", "field": "resource_id", "pattern": "late-*", "priority": 1}
    values["project"] = mixed.nlp

    preview = allocation_rule_preview(rule=AllocationRule(**values))

    # The tag names a project now, and tags come before rules.
    assert figures(preview) == {
        "from": {("Unattributed", "USD"): (Decimal("5.00"), Decimal("0"), 1)},
        "to": {("Late", "USD"): (Decimal("5.00"), Decimal("0"), 1)},
    }
    run = save_and_run(
        lambda: project_services.allocation_rule_create(**values),
        django_capture_on_commit_callbacks,
    )
    assert figures(attribution_run_movement(run=run)) == figures(preview)
    assert CostLineItem.objects.get(resource_id="late-1").attributed_by == "tag"


def test_a_run_s_window_changed_since_the_bill_is_read_line_by_line_in_the_preview(
    mixed, django_capture_on_commit_callbacks
):
    # i-gpu-1's line of 25 January was after resnet ended (20 January): the boxes rule had it.
    experiment_services.experiment_update(
        experiment=mixed.resnet, ended_at=when("2025-01-31T00:00:00")
    )
    rule = AllocationRule.objects.get(name="boxes")

    preview = allocation_rule_delete_preview(rule=rule)

    assert figures(preview) == {
        "from": {
            ("Search", "EUR"): (Decimal("7.060000000000001"), Decimal("0"), 1),
            ("Search", "USD"): (
                Decimal("17.130000000000004"),
                Decimal("13.100000000000003"),
                4,
            ),
        },
        "to": {
            ("Unattributed", "EUR"): (Decimal("7.060000000000001"), Decimal("0"), 1),
            ("Unattributed", "USD"): (
                Decimal("15.120000000000003"),
                Decimal("11.090000000000002"),
                3,
            ),
            ("Vision · experiment resnet-baseline", "USD"): (
                Decimal("2.010000000000001"),
                Decimal("2.010000000000001"),
                1,
            ),
        },
    }
    run = save_and_run(
        lambda: project_services.allocation_rule_delete(rule=rule),
        django_capture_on_commit_callbacks,
    )
    assert figures(attribution_run_movement(run=run)) == figures(preview)


def test_a_registered_resource_the_database_does_not_keep_apart_is_read_line_by_line(
    acme, tmp_path, monkeypatch
):
    """Where PostgreSQL's lower() and Arrow's fold a resource id's case apart (newer Unicode
    capitals; any non-ASCII one under a C locale), the database sums a registered resource's
    lines like any other: they are then read one by one, every one of them, once."""
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="box-1")
    run = run_import(
        write_focus(
            tmp_path / "boxes.csv",
            [
                # resnet ended on 20 January: none of these is its. Two before the last 30 days,
                # alike but for their hour (one sum), one in them.
                focus_line(
                    ResourceId="box-1",
                    ChargePeriodStart=f"2025-01-21T0{hour}:00:00Z",
                    ChargePeriodEnd=f"2025-01-21T0{hour}:30:00Z",
                    EffectiveCost=cost,
                    BilledCost=cost,
                )
                for hour, cost in ((1, "1.50"), (2, "2.25"), (3, "4.00"))
            ]
            + [
                focus_line(
                    ResourceId="box-1",
                    ChargePeriodStart="2025-01-25T00:00:00Z",
                    ChargePeriodEnd="2025-01-25T01:00:00Z",
                    EffectiveCost="8.00",
                    BilledCost="8.00",
                )
            ],
        )
    )
    assert run.status == "succeeded", run.error
    rule = AllocationRule(name="boxes", field="resource_id", pattern="box-*", project=acme.nlp)
    with transaction.atomic():
        copy.copy(rule).save()
        attributor = Attributor.load()
        transaction.set_rollback(True)
    narrow = _rule_lines([rule])
    # As a database whose lower() folds no id the way Arrow does.
    monkeypatch.setattr("apps.billing.reattribution.Lower", Upper)

    summed = unreached_dry_run(attributor=attributor, narrow=narrow)
    line_by_line = attribution_dry_run(attributor=attributor, narrow=narrow)

    assert (summed.as_json(), summed.lines) == (line_by_line.as_json(), line_by_line.lines)
    assert (summed.lines, summed.rows[("to", acme.nlp.pk, None, None, "USD")]) == (
        4,
        [Decimal("15.75"), Decimal("8.00"), 4],
    )


def test_the_preview_leaves_the_caller_s_sort_setting_as_it_was(history):
    rule = AllocationRule(name="all", field="resource_id", pattern="*", project=history.nlp)
    with transaction.atomic(), connection.cursor() as cursor:
        allocation_rule_preview(rule=rule)
        cursor.execute("SHOW enable_sort")
        assert cursor.fetchone() == ("on",)
