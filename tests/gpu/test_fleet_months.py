"""The GPU table over long ranges reads whole calendar months from GpuMonth and the ragged ends
from GpuDay: the same figures as the days would give, for staff and a lead, a page at a time,
after a day is rebuilt, and on SQLite (the embedded default) as on PostgreSQL.

Three GPUs, one GPU-hour written per hour straight to the hourly rollup:
- A (train-box #0, H100): 12:00 every day from 30 March to 2 June 2026 (65 hours);
- B (train-box #1, H100): three hours on 15 April, two on 31 May;
- C (other-box #0, A100): 23:00 on 31 March and 00:00 on 1 June.
The run `april` of project image-ranking registered train-box for April only.
"""

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from apps.gpu import daily, selectors
from apps.gpu.models import Gpu, GpuHour, GpuMonth

ROOT = Path(__file__).resolve().parents[2]

# [31 March, 2 June): 31 March and 1 June as days, April and May as months.
RAGGED = (date(2026, 3, 31), date(2026, 6, 2))


def hour(day: date, at: int) -> datetime:
    return datetime(day.year, day.month, day.day, at, tzinfo=UTC)


def build(project) -> None:
    """The scenario of the module's docstring, for `project` (plain ORM: it runs on SQLite in
    a second process too)."""
    from apps.experiments.models import Experiment, ExperimentResource

    run = Experiment.objects.create(
        project=project,
        name="april",
        started_at=hour(date(2026, 4, 1), 0),
        ended_at=hour(date(2026, 5, 1), 0),
    )
    ExperimentResource.objects.create(experiment=run, resource_id="train-box")
    a = Gpu.objects.create(uuid="GPU-a", host="train-box", index=0, model_name="H100")
    b = Gpu.objects.create(uuid="GPU-b", host="train-box", index=1, model_name="H100")
    c = Gpu.objects.create(uuid="GPU-c", host="other-box", index=0, model_name="A100")
    first = date(2026, 3, 30)
    moments = [(a, hour(first + timedelta(days=n), 12)) for n in range(65)]
    moments += [(b, hour(date(2026, 4, 15), at)) for at in (12, 13, 14)]
    moments += [(b, hour(date(2026, 5, 31), at)) for at in (0, 1)]
    moments += [(c, hour(date(2026, 3, 31), 23)), (c, hour(date(2026, 6, 1), 0))]
    GpuHour.objects.bulk_create(
        GpuHour(gpu=gpu, hour=moment, samples=60, util_samples=60, util_mean=20.0, idle_share=0.0)
        for gpu, moment in moments
    )
    daily.days_mark()


def table(user, start, end, **options) -> dict:
    """The GPU table as uuid -> GPU-hours, in its order, with its count and page."""
    page = selectors.fleet_gpus(user=user, start=start, end=end, **options)
    return {
        "rows": [[row.gpu.uuid, row.usage.gpu_hours] for row in page.rows],
        "count": page.count,
        "number": page.number,
    }


def per_model(user, start, end) -> dict:
    fleet = selectors.fleet(user=user, start=start, end=end)
    return {group.label: group.gpus for group in fleet.models}


def figures(staff, lead) -> dict:
    """Everything the tests compare, as JSON-able values."""
    return {
        "ragged": table(staff, *RAGGED),
        "all_time": table(staff, None, date(2026, 6, 3)),
        "april": table(staff, date(2026, 4, 1), date(2026, 5, 1)),
        "inside_april": table(staff, date(2026, 4, 10), date(2026, 4, 20)),
        "lead": table(lead, *RAGGED),
        "page_2_of_2": table(staff, *RAGGED, per_page=2, page=2),
        "past_the_last": table(staff, *RAGGED, per_page=2, page=7),
        "by_gpu": table(staff, *RAGGED, sort="gpu"),
        "models": per_model(staff, *RAGGED),
        "lead_models": per_model(lead, *RAGGED),
        "months": GpuMonth.objects.count(),
    }


EXPECTED = {
    "ragged": {"rows": [["GPU-a", 63.0], ["GPU-b", 5.0], ["GPU-c", 2.0]], "count": 3, "number": 1},
    "all_time": {
        "rows": [["GPU-a", 65.0], ["GPU-b", 5.0], ["GPU-c", 2.0]],
        "count": 3,
        "number": 1,
    },
    "april": {"rows": [["GPU-a", 30.0], ["GPU-b", 3.0]], "count": 2, "number": 1},
    "inside_april": {"rows": [["GPU-a", 10.0], ["GPU-b", 3.0]], "count": 2, "number": 1},
    # The lead sees the GPU-hours of their project's run: April on train-box.
    "lead": {"rows": [["GPU-a", 30.0], ["GPU-b", 3.0]], "count": 2, "number": 1},
    "page_2_of_2": {"rows": [["GPU-c", 2.0]], "count": 3, "number": 2},
    "past_the_last": {"rows": [["GPU-c", 2.0]], "count": 3, "number": 2},
    "by_gpu": {"rows": [["GPU-c", 2.0], ["GPU-a", 63.0], ["GPU-b", 5.0]], "count": 3, "number": 1},
    "models": {"H100": 2, "A100": 1},
    "lead_models": {"H100": 2},
    # A: March, April (the run's), May, June; B: April (the run's), May; C: March, June.
    "months": 8,
}


def test_long_ranges_read_whole_months_and_give_what_the_days_give(project, staff, lead):
    build(project)

    assert figures(staff, lead) == EXPECTED


def test_a_rebuilt_day_inside_a_whole_month_moves_the_month(project, staff, lead):
    build(project)
    assert table(staff, *RAGGED)["rows"][2] == ["GPU-c", 2.0]

    c = Gpu.objects.get(uuid="GPU-c")
    day = date(2026, 4, 20)
    GpuHour.objects.create(
        gpu=c, hour=hour(day, 8), samples=60, util_samples=60, util_mean=20.0, idle_share=0.0
    )
    daily.days_mark(start=day, end=day + timedelta(days=1))

    assert table(staff, *RAGGED)["rows"] == [["GPU-a", 63.0], ["GPU-b", 5.0], ["GPU-c", 3.0]]
    april = GpuMonth.objects.get(gpu=c, month=date(2026, 4, 1))
    assert (april.projects, april.gpu_hours) == ("", 1.0)
    assert GpuMonth.objects.count() == 9


SCRIPT = """
import json
from django.contrib.auth import get_user_model
from apps.accounts.models import Membership, Team
from apps.projects.models import Project
from tests.gpu.test_fleet_months import build, figures

team = Team.objects.create(name="Vision", slug="vision")
project = Project.objects.create(team=team, name="Image ranking", slug="image-ranking")
users = get_user_model().objects
staff = users.create_user("sam-staff", is_staff=True)
lead = users.create_user("lena-lead")
Membership.objects.create(team=team, user=lead, role="lead")
build(project)
print(json.dumps(figures(staff, lead)))
"""


def test_the_same_figures_on_sqlite(sqlite_database):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{sqlite_database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "--verbosity", "0", "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == EXPECTED


def test_the_migration_sums_the_months_of_a_rollup_built_before_them(project):
    """gpu 0006 fills GpuMonth from the GpuDay rows already there, the same rows the rebuild
    writes, and leaves the rollup current (no page after the deploy rebuilds it whole)."""
    from importlib import import_module

    from django.apps import apps
    from django.db import connection

    from apps.gpu.models import GpuRollupState

    build(project)
    daily.days_ensure()
    fields = ("month", "gpu_id", "projects", "gpu_hours", "weighted_util", "idle_gpu_hours")
    written = sorted(GpuMonth.objects.values_list(*fields))
    GpuMonth.objects.all().delete()

    migration = import_module("apps.gpu.migrations.0006_gpu_month")
    with connection.schema_editor() as editor:
        migration.months_from_days(apps, editor)

    assert sorted(GpuMonth.objects.values_list(*fields)) == written
    assert len(written) == 8
    assert GpuRollupState.objects.get().stale_all is False
