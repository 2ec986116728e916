"""seed_demo: the demo organisation's exact shape, its logins, and that a second run is harmless.

A seed is the slow part (the full demo loads 88 days of bills and GPU metrics), so each class seeds
once, inside transactions it rolls back at its end, and its tests run in savepoints of those: a
test sees the organisation as the seed left it, and what it changes is gone before the next test.
"""

import contextlib
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone

from apps.accounts.models import Membership, Organization, Team
from apps.demo.seed import DEMO_HISTORY_DAYS, DEMO_ORGANIZATION_NAME
from apps.deployments.models import Deployment, DeploymentResource, Model
from apps.experiments.models import Experiment, ExperimentResource
from apps.insights.selectors_build_or_call import build_or_call_all, default_period
from apps.projects.models import Project, TagKeyAlias

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def printed_logins(output: str) -> list[tuple[str, str, str, str]]:
    """(role, team, username, password) for each login line the command printed."""
    lines = output.split("Demo logins (role, team, username, password):\n", 1)[1].splitlines()
    return [tuple(line.split()) for line in lines if line.strip()]


def shape() -> dict:
    return {
        "teams": sorted(Team.objects.values_list("slug", flat=True)),
        "roles": Counter(Membership.objects.values_list("role", flat=True)),
        "staff": get_user_model().objects.filter(is_staff=True).count(),
        "users": get_user_model().objects.count(),
        "projects": Project.objects.count(),
        "experiments": Experiment.objects.count(),
        "status": Counter(Experiment.objects.values_list("status", flat=True)),
        "kind": Counter(Experiment.objects.values_list("kind", flat=True)),
        "models": Model.objects.count(),
        "deployments": Counter(Deployment.objects.values_list("serving_pattern", flat=True)),
        "experiment_resources": ExperimentResource.objects.count(),
        "deployment_resources": DeploymentResource.objects.count(),
    }


# The small demo's moment: its bill's months and its hours of traffic are counted from it.
SMALL_DEMO_NOW = "2026-11-30 04:00:00Z"


@dataclass(frozen=True)
class Seeded:
    output: str  # what the seeding seed_demo printed
    directory: Path  # COSTSITE_DATA_DIR while the class runs


@contextlib.contextmanager
def seeded_once(django_db_blocker, directory: Path, *args: str, now: str | None = None):
    """Seed the demo in transactions on every database alias, yield, then roll them back.

    pytest-django wraps each test in atomic blocks that nest in these (savepoints), so the tests
    of a class share one seed and never see each other's writes. COSTSITE_DATA_DIR points at
    `directory` for as long as the class runs; users are hashed as the tests hash them.
    """
    import time_machine

    data_dir = override_settings(
        COSTSITE_DATA_DIR=directory,
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
    )
    data_dir.enable()
    aliases = list(connections)
    atomics = [transaction.atomic(using=alias) for alias in aliases]
    with django_db_blocker.unblock():
        for atomic in atomics:
            atomic.__enter__()
    try:
        with django_db_blocker.unblock():
            travel = time_machine.travel(now) if now else contextlib.nullcontext()
            with travel:
                output = seed(*args)
        yield Seeded(output=output, directory=directory)
    finally:
        with django_db_blocker.unblock():
            for alias, atomic in reversed(list(zip(aliases, atomics, strict=True))):
                transaction.set_rollback(True, using=alias)
                atomic.__exit__(None, None, None)
        data_dir.disable()


@pytest.fixture(scope="class")
def small_demo(django_db_setup, django_db_blocker, tmp_path_factory):
    """The small demo, seeded once per class at SMALL_DEMO_NOW."""
    with seeded_once(
        django_db_blocker, tmp_path_factory.mktemp("small-demo"), "--small", now=SMALL_DEMO_NOW
    ) as seeded:
        yield seeded


@pytest.fixture(scope="class")
def full_demo(django_db_setup, django_db_blocker, tmp_path_factory):
    """The full demo, seeded once per class, now."""
    with seeded_once(django_db_blocker, tmp_path_factory.mktemp("full-demo")) as seeded:
        yield seeded


class TestTheSmallDemo:
    """One small seed (`seed_demo --small`, as at SMALL_DEMO_NOW) for every test here."""

    def test_small_demo_has_two_teams_each_with_a_lead_and_a_member_and_one_staff_admin(
        self, small_demo
    ):
        result = shape()
        assert result["teams"] == ["language", "vision"]
        assert result["roles"] == {"lead": 2, "member": 2}
        assert result["staff"] == 1
        assert result["users"] == 5
        org = Organization.get()
        assert (org.name, org.currency, org.time_zone) == (
            DEMO_ORGANIZATION_NAME,
            "USD",
            "America/New_York",
        )

    def test_small_demo_has_exactly_the_runs_models_and_deployments_of_its_catalogue(
        self, small_demo
    ):
        result = shape()
        assert result["projects"] == 4
        # The catalogue's 15 runs, 3 imported from the W&B runs file (finished, crashed,
        # running) and the 3 of apps/demo/findings.py (a running pre-training run, two fine-tunes
        # that succeeded).
        assert result["experiments"] == 15 + 3 + 3
        assert result["status"] == {
            "succeeded": 7 + 1 + 2,
            "failed": 3 + 1,
            "stopped": 2,
            "running": 2 + 1 + 1,
            "planned": 1,
        }
        assert result["kind"] == {
            "training": 5 + 3 + 1,
            "fine_tuning": 4 + 2,
            "evaluation": 4,
            "notebook": 2,
        }
        # and the two that call hosted APIs (apps/demo/model_api.py), each with its model.
        assert result["models"] == 4 + 2
        assert result["deployments"] == {"realtime": 2 + 2, "batch": 1}
        # Every run but the planned one has machines, one spot run two (it was interrupted), and the
        # evaluation runs queue on one shared box; the W&B runs and those of apps/demo/findings.py
        # have one each.
        assert result["experiment_resources"] == 15 + 3 + 3
        assert ExperimentResource.objects.values("resource_id").distinct().count() == 13 + 3 + 3
        assert result["deployment_resources"] == 2 + 1 + 2  # one instance per replica

    def test_a_spot_run_resumed_after_an_interruption_ran_on_two_instances_one_after_the_other(
        self, small_demo
    ):
        run = Experiment.objects.get(name="vit-b16-baseline")
        first, second = run.resources.order_by("started_at")
        assert run.is_spot and run.status == "succeeded"
        assert first.resource_id != second.resource_id
        assert (first.started_at, first.ended_at, second.started_at, second.ended_at) == (
            run.started_at,
            second.started_at,
            first.ended_at,
            run.ended_at,
        )

    def test_the_demo_imports_runs_from_a_wandb_file_with_their_loss_and_bills_their_machines(
        self, small_demo
    ):
        from apps.billing.models import CostLineItem
        from apps.trackers.models import TrackedRun

        runs = {
            tracked.experiment.name: tracked.experiment
            for tracked in TrackedRun.objects.filter(tracker="wandb").select_related("experiment")
        }
        assert {name: run.status for name, run in runs.items()} == {
            "yolo-v8-sweep-7": "succeeded",
            "intent-llama-lora": "failed",
            "colbert-distill": "running",
        }
        assert {name: run.metric_points.count() for name, run in runs.items()} == {
            "yolo-v8-sweep-7": 40,
            "intent-llama-lora": 13,
            "colbert-distill": 40,
        }
        for run in runs.values():
            assert CostLineItem.objects.filter(experiment=run).exists(), run.name

    def test_every_run_of_a_model_family_is_linked_to_the_model_it_produces(self, small_demo):
        model = Model.objects.get(name="defect-vit")
        assert sorted(model.experiments.values_list("name", flat=True)) == [
            "vit-b16-baseline",
            "vit-b16-lr3e-4",
            "vit-b16-mixup",
        ]
        assert list(model.deployments.values_list("name", flat=True)) == ["defect-vit-edge"]

    def test_tag_key_aliases_are_the_ones_the_company_already_uses(self, small_demo):
        assert sorted(TagKeyAlias.objects.values_list("dimension", "key")) == [
            ("deployment", "deployment"),
            ("deployment", "service"),
            ("experiment", "experiment"),
            ("experiment", "run-id"),
            ("project", "ml-project"),
            ("project", "project"),
            ("project", "user:project"),
        ]

    def test_printed_logins_authenticate_and_have_the_printed_role(self, small_demo):
        output = small_demo.output

        logins = printed_logins(output)
        assert [(role, team, username) for role, team, username, _ in logins] == [
            ("staff", "-", "admin"),
            ("lead", "Vision", "vision-lead"),
            ("member", "Vision", "vision-member"),
            ("lead", "Language", "language-lead"),
            ("member", "Language", "language-member"),
        ]
        for role, team, username, password in logins:
            user = authenticate(username=username, password=password)
            assert user is not None, f"{username} / {password} did not authenticate"
            if role == "staff":
                assert user.is_staff and user.is_superuser
            else:
                assert not user.is_staff
                assert list(user.memberships.values_list("team__name", "role")) == [(team, role)]

    def test_running_it_again_changes_nothing_and_prints_the_same_logins(self, small_demo):
        first = small_demo.output
        before = shape()

        second = seed("--small")
        third = seed()  # the full demo asked for on top of the small one: still nothing changes

        assert shape() == before
        assert "Created the demo organisation Northwind Robotics." in first
        expected = "The demo organisation Northwind Robotics already exists; nothing was changed."
        assert expected in second
        assert expected in third
        assert printed_logins(second) == printed_logins(first) == printed_logins(third)

    def test_the_same_seed_lays_out_the_same_organisation(self, small_demo, settings, tmp_path):
        def layout():
            return sorted(
                Experiment.objects.values_list(
                    "project__slug", "name", "external_id", "status", "resources__resource_id"
                )
            )

        first = layout()
        Project.objects.all().delete()
        Team.objects.all().delete()
        get_user_model().objects.all().delete()
        Organization.objects.all().delete()
        settings.COSTSITE_DATA_DIR = tmp_path  # its files apart from the class's seed's

        seed("--small")

        assert layout() == first

    @pytest.mark.django_db(databases=["default", "progress"])
    def test_the_demo_bill_and_gpu_metrics_are_loaded_through_the_real_importers(self, small_demo):
        import time_machine

        from apps.billing.models import BillingSource, CostLineItem, DailyCost, Delivery, ImportRun
        from apps.gpu.models import GpuHour

        tmp_path = small_demo.directory
        with time_machine.travel(SMALL_DEMO_NOW):
            seed("--small")  # a second run imports nothing again

        # The exports are a folder source's, polled once: one run per file, from that source.
        source = BillingSource.objects.get()
        assert (source.kind, source.path) == ("folder", str(tmp_path / "demo" / "billing"))
        runs = list(ImportRun.objects.filter(origin=ImportRun.Origin.SOURCE).order_by("pk"))
        assert [(run.status, run.source_id) for run in runs] == [
            (ImportRun.Status.SUCCEEDED, source.pk)
        ] * 2
        files = sorted(p.name for p in (tmp_path / "demo" / "billing").iterdir())
        # The small organisation runs on AWS only: last full month and this month to date.
        assert files == ["focus-aws-2026-10.csv", "focus-aws-2026-11.csv"]
        assert sorted(run.display_name for run in runs) == files
        # The hosted-API teams' files (apps/demo/model_api.py) are imported as an operator's
        # command would, a run each: the gateway's log and the Bedrock CUR of both months.
        commands = list(ImportRun.objects.exclude(origin=ImportRun.Origin.SOURCE))
        assert sorted((run.status, run.origin, run.display_name) for run in commands) == [
            (ImportRun.Status.SUCCEEDED, ImportRun.Origin.COMMAND, name)
            for name in (
                "bedrock-cur-2026-10.csv",
                "bedrock-cur-2026-11.csv",
                "litellm-spend-logs-2026-10.csv",
                "litellm-spend-logs-2026-11.csv",
            )
        ]
        assert Delivery.objects.filter(status=Delivery.Status.CURRENT).count() == len(files) + 4
        assert CostLineItem.objects.count() == sum(run.line_items for run in runs + commands)
        workloads = set(DailyCost.objects.values_list("workload", flat=True))
        assert {"training", "inference", "development", "storage", "unattributed"} <= workloads
        assert GpuHour.objects.exists()

    @pytest.mark.django_db(databases=["default", "progress"])
    def test_every_deployment_serves_hourly_traffic_and_every_training_run_has_a_loss_curve(
        self, small_demo
    ):
        import time_machine

        from apps.deployments.models import TrafficHour
        from apps.experiments.models import MetricPoint

        with time_machine.travel(SMALL_DEMO_NOW):
            seed("--small")  # a second run records nothing twice
        from datetime import UTC, datetime

        now = datetime(2026, 11, 30, 4, tzinfo=UTC)
        for deployment in Deployment.objects.all():
            hours = TrafficHour.objects.filter(deployment=deployment)
            started = max(deployment.started_at, now - timedelta(days=DEMO_HISTORY_DAYS))
            ended = min(deployment.ended_at or now, now)
            assert hours.count() >= int((ended - started) / timedelta(hours=1)) - 1, deployment
            assert hours.filter(requests__gt=0).exists()
        training = Experiment.objects.filter(kind__in=["training", "fine_tuning"])
        assert training.exists()
        # Runs that came with their own loss keep it: the W&B runs' history and the stalled run's.
        from apps.trackers.models import TrackedRun

        own = set(TrackedRun.objects.values_list("experiment_id", flat=True))
        own.add(Experiment.objects.get(external_id="pretrain-plateau-1").pk)
        shapes = []
        for run in training:
            loss = list(MetricPoint.objects.filter(experiment=run, name="loss").order_by("step"))
            assert len(loss) >= 10 if run.pk in own else len(loss) == 60, run
            shapes.append(loss[-1].value < loss[0].value * 0.5)
        # Some converge, some stay flat.
        assert True in shapes and False in shapes

    def test_two_teams_call_hosted_apis_each_key_mapped_to_a_deployment_one_should_self_host(
        self, small_demo
    ):
        """apps/demo/model_api.py: a LiteLLM gateway's log and Bedrock in a CUR, through the real
        importers; the LiteLLM team and the inference profile mapped; the open model's verdict."""
        from apps.billing.models import CostLineItem, Delivery, ModelApiKey
        from apps.demo.model_api import GATEWAY_TEAM, PROFILE

        keys = {
            m.key: (m.kind, m.project.slug, m.deployment.name)
            for m in ModelApiKey.objects.select_related("project", "deployment")
        }
        assert keys == {
            GATEWAY_TEAM: ("litellm_team", "doc-search", "wiki-answers"),
            PROFILE: ("bedrock_profile", "retail-shelf-vision", "shelf-captions"),
        }
        formats = set(
            Delivery.objects.filter(status="current").values_list("format", flat=True).distinct()
        )
        assert {"litellm_spend_logs", "aws-cur"} <= formats
        api_lines = CostLineItem.objects.filter(cost_kind="model_api")
        assert set(api_lines.values_list("deployment__name", "workload")) == {
            ("wiki-answers", "inference"),
            ("shelf-captions", "inference"),
        }
        assert set(
            api_lines.filter(deployment__name="shelf-captions").values_list("model", flat=True)
        ) == {"Llama3-3-70B"}
        start, end = default_period()
        verdicts = {
            row.deployment.name: (row.result.inputs.api_served, row.result.verdict)
            for row in build_or_call_all(start=start, end=end)
            if row.deployment.name in ("wiki-answers", "shelf-captions")
        }
        assert verdicts == {"wiki-answers": (True, None), "shelf-captions": (True, "self_host")}


class TestTheFullDemo:
    """One full seed (`seed_demo`) for every test here."""

    def test_full_demo_covers_every_status_and_kind_with_a_dozen_projects(self, full_demo):
        result = shape()
        assert result["teams"] == ["language", "platform", "recommendations", "vision"]
        assert result["roles"] == {"lead": 4, "member": 4}
        assert result["users"] == 9
        assert result["projects"] == 12
        # The catalogue's 103 runs, 5 imported from the W&B runs file and the 3 of
        # apps/demo/findings.py.
        assert result["experiments"] == 103 + 5 + 3
        assert result["status"] == {
            "succeeded": 56 + 2 + 2,
            "failed": 17 + 1,
            "stopped": 14 + 1,
            "running": 12 + 1 + 1,
            "planned": 4,
        }
        assert result["kind"] == {
            "training": 43 + 5 + 1,
            "fine_tuning": 19 + 2,
            "evaluation": 25,
            "notebook": 16,
        }
        assert result["models"] == 12 + 2
        assert result["deployments"] == {"realtime": 4 + 2, "batch": 3}
        assert Deployment.objects.filter(data_residency=True).count() == 1
        assert Deployment.objects.filter(is_fine_tuned=True).count() == 2
        assert Experiment.objects.filter(is_spot=True).count() == 14
        assert Project.objects.filter(monthly_budget__isnull=True).count() == 1
        # Build or call (apps/demo/build_or_call.py): a model of each verdict, with hourly traffic
        # and an API model picked.
        start, end = default_period()
        verdicts = {
            row.deployment.name: (
                row.result.verdict,
                row.result.inputs.api.name,
                row.result.requests > 0,
            )
            for row in build_or_call_all(start=start, end=end)
            if row.result.inputs.api is not None and not row.result.inputs.api_served
        }
        assert verdicts == {
            "embedder-api": ("self_host", "text-embedding-3-large", True),
            "support-llm-8b": (
                "call_api",
                "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
                True,
            ),
            "seg-batch-nightly": ("self_host_required", "gpt-4o", True),
        }

    def test_run_times_agree_with_their_status_and_lie_in_the_last_three_months(self, full_demo):
        now = timezone.now()
        oldest = now - timedelta(days=DEMO_HISTORY_DAYS)

        planned = Experiment.objects.filter(status="planned")
        assert not planned.exclude(started_at=None, ended_at=None).exists()
        assert not ExperimentResource.objects.filter(experiment__status="planned").exists()
        running = Experiment.objects.filter(status="running")
        assert not running.exclude(ended_at=None).exists()
        assert not running.filter(started_at__gt=now).exists()
        ended = Experiment.objects.filter(status__in=["succeeded", "failed", "stopped"])
        assert not ended.filter(started_at=None).exists()
        assert not ended.filter(ended_at__gt=now).exists()
        assert not Experiment.objects.filter(started_at__lt=oldest).exists()
        # A resource without a window of its own was used for its run's whole window.
        assert ExperimentResource.objects.exclude(started_at=None).count() == 6
        for resource in ExperimentResource.objects.exclude(started_at=None).select_related(
            "experiment"
        ):
            run = resource.experiment
            assert run.started_at <= resource.started_at < resource.ended_at <= run.ended_at

    def test_resource_ids_look_like_the_clouds_own(self, full_demo):
        ids = list(ExperimentResource.objects.values_list("resource_id", flat=True)) + list(
            DeploymentResource.objects.values_list("resource_id", flat=True)
        )
        aws = [i for i in ids if i.startswith("i-")]
        gcp = [
            i for i in ids if i.startswith("//compute.googleapis.com/projects/northwind-ml/zones/")
        ]
        assert len(aws) + len(gcp) == len(ids)
        assert all(len(i) == 19 and int(i[2:], 16) >= 0 for i in aws)
        assert len(gcp) == 10
        run = Experiment.objects.get(name="nw-1b3-pretrain-main")
        assert (run.instance_type, run.gpu_type, run.gpu_count) == ("p5.48xlarge", "H100-80GB", 32)
        assert run.resources.count() == 4  # four nodes, one instance each


def test_it_refuses_a_database_that_holds_another_organisation():
    Team.objects.create(name="Research", slug="research")

    with pytest.raises(CommandError) as error:
        seed("--small")

    assert str(error.value) == (
        "This database already holds an organisation (1 teams, 0 projects); "
        "seed_demo only fills an empty database."
    )
    assert Project.objects.count() == 0
    assert get_user_model().objects.count() == 0


@pytest.mark.django_db(databases=[])
def test_the_demo_runs_on_sqlite_without_postgresql_or_redis(tmp_path):
    """What `bash scripts/demo` does before it serves: migrate a SQLite file and seed it, twice."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_", "EMAIL_"))
    }
    # A broker nobody listens on: the demo must not need one.
    env |= {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "CELERY_BROKER_URL": "redis://127.0.0.1:9/0",
        "COSTSITE_DATA_DIR": str(tmp_path),
    }

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,  # the full demo: 88 days of bills and GPU metrics through the importers
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    manage("migrate", "--no-input", "-v", "0")
    assert "Created the demo organisation" in manage("seed_demo")
    assert "already exists" in manage("seed_demo")
    probe = (
        "from django.test import Client; c = Client(); "
        "print(c.get('/health/').status_code, c.get('/login/').status_code, "
        "c.post('/login/', {'username': 'vision-lead', 'password': 'costsite-demo'}).status_code)"
    )
    assert manage("shell", "-v", "0", "-c", probe).split() == ["200", "200", "302"]
