"""Weights & Biases runs from files: the UI's CSV export and the public API's runs JSON, by the
command and the service; all or nothing, faults named by row and column."""

import json
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import Organization, Team
from apps.experiments.models import Experiment, MetricPoint
from apps.gpu.models import HostMapping
from apps.projects.models import AllocationRule, Project, TagKeyAlias
from apps.trackers.models import TrackedRun
from apps.trackers.services import RunMapping, wandb_runs_import
from apps.trackers.wandb import WandbFileError

pytestmark = pytest.mark.django_db

MAPPING = RunMapping(resource_tags=("instance_id", "host"))

CSV = (
    "Name,ID,State,Notes,User,Tags,Created,Runtime,Sweep,project,instance_id,gpu_count,lr,loss\n"
    'bert-base,ab12cd34,finished,,ana,"baseline,nlp",2025-01-02T10:00:00.000Z,3600,,'
    "language,i-0nlp1,2,0.001,0.42\n"
    "bert-large,ef56gh78,crashed,,ana,,2025-01-02T11:00:00.000Z,600,,language,i-0nlp2,8,0.0005,"
    "1.9\n"
    "bert-xl,ij90kl12,running,,ben,,2025-01-02T12:00:00Z,120,,language,,,,\n"
)


@pytest.fixture
def language(db):
    Organization.get()
    team = Team.objects.create(name="Machine learning", slug="ml")
    return Project.objects.create(team=team, name="Language", slug="language")


def when(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_runs_csv_becomes_experiments_with_status_resources_and_summary(language):
    tally = wandb_runs_import(name="runs.csv", data=CSV.encode(), mapping=MAPPING)

    assert (tally.created, tally.updated, tally.unchanged, tally.unassigned) == (3, 0, 0, 0)
    runs = {e.name: e for e in Experiment.objects.filter(project=language)}
    assert {name: run.status for name, run in runs.items()} == {
        "bert-base": Experiment.Status.SUCCEEDED,
        "bert-large": Experiment.Status.FAILED,
        "bert-xl": Experiment.Status.RUNNING,
    }
    base = runs["bert-base"]
    assert (base.started_at, base.ended_at) == (
        when("2025-01-02T10:00:00"),
        when("2025-01-02T11:00:00"),
    )
    assert runs["bert-xl"].ended_at is None
    assert base.external_id == "wandb-ab12cd34"
    assert base.gpu_count == 2
    assert list(base.resources.values_list("resource_id", flat=True)) == ["i-0nlp1"]
    assert base.tags["wandb.tag.baseline"] == "" and base.tags["param.loss"] == "0.42"
    # The CSV has summary values only: no loss history.
    assert not MetricPoint.objects.exists()


def test_importing_the_same_file_again_changes_nothing(language):
    wandb_runs_import(name="runs.csv", data=CSV.encode(), mapping=MAPPING)

    again = wandb_runs_import(name="runs.csv", data=CSV.encode(), mapping=MAPPING)

    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
    assert Experiment.objects.count() == 3
    assert TrackedRun.objects.filter(tracker="wandb").count() == 3


def test_a_bad_row_imports_nothing_and_names_row_and_column(language):
    bad = CSV.replace("crashed", "exploded").replace("2025-01-02T12:00:00Z", "noon")

    with pytest.raises(WandbFileError) as raised:
        wandb_runs_import(name="runs.csv", data=bad.encode(), mapping=MAPPING)

    assert raised.value.errors == [
        "runs.csv, row 3, column State: unknown state “exploded”; W&B's states are crashed, "
        "failed, finished, killed, pending, preempted, running.",
        "runs.csv, row 4, column Created: “noon” is not a date and time (ISO 8601).",
    ]
    assert not Experiment.objects.exists()


def test_a_csv_without_the_run_columns_is_refused_by_name(language):
    with pytest.raises(WandbFileError) as raised:
        wandb_runs_import(name="runs.csv", data=b"Name,lr\nx,1\n", mapping=MAPPING)

    assert raised.value.errors == [
        "runs.csv, row 1: no State and no Created column; export the runs table from W&B with "
        "the Name, State and Created columns shown."
    ]


def test_api_runs_json_brings_the_loss_history_and_the_mapped_host(language, tmp_path):
    HostMapping.objects.create(host="dgx-3", resource_id="i-0dgx3")
    TagKeyAlias.objects.create(dimension="project", key="team_project")
    runs = [
        {
            "id": "q1w2e3r4",
            "name": "gpt-small",
            "state": "finished",
            "project": "scratch",
            "created_at": "2025-01-05T08:00:00",
            "heartbeat_at": "2025-01-05T09:30:00",
            "tags": ["small"],
            "config": {"team_project": {"value": "language", "desc": None}, "gpu_count": 4},
            "summary": {"loss": 0.9, "_runtime": 5400},
            "metadata": {"host": "dgx-3"},
            "history": [
                {"_step": 0, "loss": 3.5, "_timestamp": 1736064000.0},
                {"_step": 10, "loss": 2.25, "_timestamp": 1736064600.0},
                {"_step": 20, "loss": None, "acc": 0.5},
            ],
        }
    ]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))

    call_command("import_wandb_runs", str(path), "--resource-tags", "host")

    run = Experiment.objects.get(project=language)
    assert (run.name, run.status, run.gpu_count) == ("gpt-small", "succeeded", 4)
    assert run.ended_at == when("2025-01-05T09:30:00")
    assert list(run.resources.values_list("resource_id", flat=True)) == ["i-0dgx3"]
    assert list(run.metric_points.values_list("name", "step", "value")) == [
        ("loss", 0, 3.5),
        ("loss", 10, 2.25),
    ]
    assert run.metric_points.first().recorded_at == datetime.fromtimestamp(1736064000, tz=UTC)


def test_the_w_and_b_project_name_places_a_run_without_a_project_key(language):
    data = json.dumps(
        {
            "runs": [
                {
                    "id": "z9",
                    "state": "killed",
                    "project": "Language",
                    "created_at": "2025-01-05T08:00:00Z",
                }
            ]
        }
    ).encode()

    wandb_runs_import(name="runs.json", data=data, mapping=MAPPING)

    assert Experiment.objects.get(project=language).status == Experiment.Status.STOPPED


def test_a_rule_on_its_resource_places_a_run_without_a_project_key(language):
    vision = Project.objects.create(team=language.team, name="Vision", slug="vision")
    AllocationRule.objects.create(
        name="vision boxes", field="resource_id", pattern="I-0NLP*", priority=20, project=vision
    )
    AllocationRule.objects.create(
        name="nlp boxes", field="resource_id", pattern="i-0nlp?", priority=10, project=language
    )
    AllocationRule.objects.create(
        name="by service", field="service_name", pattern="*", priority=1, project=vision
    )
    rows = (
        "Name,ID,State,Created,Runtime,instance_id\n"
        "tagless,t1,finished,2025-01-02T10:00:00Z,60,i-0nlp1\n"
        "other-box,t2,finished,2025-01-02T10:00:00Z,60,i-0nlp22\n"
        "no-box,t3,finished,2025-01-02T10:00:00Z,60,\n"
    )

    tally = wandb_runs_import(name="runs.csv", data=rows.encode(), mapping=MAPPING)

    # The lowest priority number wins; a rule on another field says nothing about a run.
    assert (tally.created, tally.unassigned) == (2, 1)
    assert dict(Experiment.objects.values_list("name", "project__slug")) == {
        "tagless": "language",
        "other-box": "vision",
    }


def test_a_run_no_project_takes_is_skipped_and_counted(language):
    data = json.dumps(
        [{"id": "z9", "state": "finished", "project": "elsewhere", "created_at": "2025-01-05"}]
    ).encode()

    tally = wandb_runs_import(name="runs.json", data=data, mapping=MAPPING)

    assert (tally.created, tally.unassigned) == (0, 1)
    assert not Experiment.objects.exists()


def test_a_bad_json_run_is_named_by_its_number_and_field_and_the_command_imports_nothing(
    language, tmp_path
):
    runs = [
        {"id": "ok1", "state": "finished", "project": "language", "created_at": "2025-01-05"},
        {"id": "ok1", "state": "finished", "project": "language", "created_at": "yesterday"},
        {"id": "b3", "state": "finished", "created_at": "2025-01-05", "history": [{"_step": -1}]},
    ]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))

    with pytest.raises(CommandError) as raised:
        call_command("import_wandb_runs", str(path))

    assert str(raised.value).splitlines() == [
        "Nothing was imported:",
        f"{path}, run 2, field id: run “ok1” is also run 1.",
        f"{path}, run 2, field created_at: “yesterday” is not a date and time (ISO 8601).",
        f"{path}, run 3, field history[1]._step: “-1” is not a step (a whole number ≥ 0).",
    ]
    assert not Experiment.objects.exists()


def test_a_run_whose_resources_changed_announces_them_to_the_ownership_port(language, monkeypatch):
    from apps.projects import ports

    wandb_runs_import(name="runs.csv", data=CSV.encode(), mapping=MAPPING)
    announced = []
    monkeypatch.setattr(
        ports.ownership_changed, "_handlers", [lambda **kwargs: announced.append(kwargs)]
    )

    moved = CSV.replace("i-0nlp1", "i-0nlp9")
    tally = wandb_runs_import(name="runs.csv", data=moved.encode(), mapping=MAPPING)

    assert (tally.updated, tally.unchanged) == (1, 2)
    assert [set(call["resource_ids"]) for call in announced] == [{"i-0nlp1", "i-0nlp9"}]
    run = Experiment.objects.get(name="bert-base")
    assert list(run.resources.values_list("resource_id", flat=True)) == ["i-0nlp9"]
