"""The demo runs on SQLite: the recompute and the findings command give the same figures there."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
from apps.accounts.models import Team
from apps.projects.models import Project
from tests.insights.conftest import build_bill, make_delivery
team = Team.objects.create(name="Vision", slug="vision")
project = Project.objects.create(team=team, name="Image ranking", slug="image-ranking")
build_bill(make_delivery(), project)
"""


def manage(*args, database: Path, stdin: str = "") -> str:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_findings_on_sqlite_match_the_hand_computed_figures(sqlite_database):
    database = sqlite_database
    manage("shell", database=database, stdin=SETUP)
    summary = json.loads(manage("findings_recompute", "--json", database=database))
    assert summary["findings"]["open"] == 5
    rows = [
        json.loads(text) for text in manage("findings", "--json", database=database).splitlines()
    ]
    assert {
        (row["kind"], row["resource_id"] or row["service_name"]): row["wasted"] for row in rows
    } == {
        ("idle_gpu", "i-a"): {"USD": "5"},
        ("idle_gpu", "i-b"): {"USD": "3.25"},
        ("idle_gpu", "i-u"): {"USD": "10"},
        ("unattributed", "i-u"): {"USD": "20"},
        ("unattributed", "Amazon S3"): {"USD": "15"},
    }


PART2 = """
from apps.accounts.models import Organization, Team
from apps.billing.loader import rollups_rebuild
from apps.projects.models import Project
from tests.insights.conftest import make_delivery
from tests.insights.test_part2 import starved_run
org = Organization.get()
org.currency = "USD"
org.save()
team = Team.objects.create(name="Vision", slug="vision")
project = Project.objects.create(team=team, name="Image ranking", slug="image-ranking")
delivery = make_delivery()
starved_run(project, delivery, {
    "a": [(0, 60, 10.0), (1, 60, 30.0), (3, 60, 100.0)],
    "b": [(0, 30, 40.0), (1, 90, 10.0)],
    "c": [(0, 60, 20.0), (1, 60, 20.0)],
})
rollups_rebuild(delivery_id=delivery.pk)
"""


def test_data_starved_on_sqlite_matches_postgresql(sqlite_database):
    """The run's utilisation is summed in one raw SQL statement: the same figure on SQLite as in
    test_part2.py on PostgreSQL."""
    database = sqlite_database
    manage("shell", database=database, stdin=PART2)
    manage("findings_recompute", "--json", database=database)
    rows = [
        json.loads(text)
        for text in manage(
            "findings", "--json", "--kind", "data_starved", database=database
        ).splitlines()
    ]
    assert [row["wasted"] for row in rows] == [{"USD": "10.41665"}]
