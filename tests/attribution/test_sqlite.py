"""The demo runs on SQLite: the spend pages, their exports and a claim must work there too, with
the same figures (a bill imported by the command, the pages fetched in a second process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import write_bill

ROOT = Path(__file__).resolve().parents[2]

PAGES = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from apps.accounts.models import Membership, Organization, Team
from apps.experiments.models import Experiment
from apps.deployments.models import Deployment, Model
from apps.projects.models import Project

org = Organization.get()
org.currency, org.time_zone = "USD", "UTC"
org.save()
team = Team.objects.get(slug="vision")
staff = get_user_model().objects.create_user("root", is_staff=True)
client = Client()
client.force_login(staff)
project = Project.objects.get(slug="image-ranking")
model = Model.objects.create(project=project, name="ranker")
run = Experiment.objects.get(name="resnet")
run.model = model
run.save()
serving = Deployment.objects.create(project=project, model=model, name="ranker-prod")
out = {}
for name, url in [
    ("overview", "/?preset=all"),
    ("overview_partial", "/?preset=12m"),
    ("project", "/projects/image-ranking/?preset=all"),
    ("model", f"/models/{model.pk}/"),
    ("experiment", f"/experiments/{run.pk}/"),
    ("deployment", f"/deployments/{serving.pk}/"),
    ("unattributed", "/unattributed/?preset=all"),
    ("export", "/spend.csv?table=projects&preset=all"),
]:
    headers = {"HX-Request": "true", "HX-Target": "spend"} if name.endswith("partial") else {}
    response = client.get(url, headers=headers)
    body = (
        b"".join(response.streaming_content) if response.streaming else response.content
    ).decode()
    out[name] = [response.status_code, body]
response = client.post(
    "/unattributed/claim/",
    {"resource_id": "i-stray", "target": f"experiment:{run.pk}"},
    follow=True,
)
out["claim"] = [response.status_code, response.content.decode()]
out["after"] = [0, client.get("/unattributed/?preset=all").content.decode()]
# Traffic recorded after the deployment's page was cached shows on its next load.
from datetime import UTC, datetime
from apps.deployments.services import TrafficFigures, deployment_traffic_record
out["deployment"] = [200, client.get(f"/deployments/{serving.pk}/").content.decode()]
deployment_traffic_record(
    deployment=serving,
    hours=[TrafficFigures(hour=datetime(2025, 3, 12, 10, tzinfo=UTC), requests=1200)],
)
out["traffic"] = [0, client.get(f"/deployments/{serving.pk}/").content.decode()]
print(json.dumps(out))
"""

SETUP = """
from apps.accounts.models import Team
from apps.experiments.models import Experiment
from apps.projects.models import Project
team = Team.objects.create(name="Vision", slug="vision")
project = Project.objects.create(team=team, name="Image ranking", slug="image-ranking")
Experiment.objects.create(project=project, name="resnet", external_id="resnet")
"""


def manage(*args, database: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "DJANGO_DEBUG": "true",
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
    return result


def line(day: str, resource: str, amount: str, tags: str = "") -> dict:
    return {
        "ChargePeriodStart": f"2025-03-{day}T10:00:00Z",
        "ChargePeriodEnd": f"2025-03-{day}T11:00:00Z",
        "BilledCost": amount,
        "EffectiveCost": amount,
        "ResourceId": resource,
        "Tags": tags,
    }


def test_the_spend_pages_work_on_sqlite_with_the_same_figures(tmp_path, sqlite_database):
    database = sqlite_database
    manage("shell", database=database, stdin=SETUP)
    bill = write_bill(
        tmp_path / "march.csv",
        [
            line("10", "i-train", "12.50", '{"project": "image-ranking", "experiment": "resnet"}'),
            line("11", "i-stray", "7.25"),
            line("12", "i-stray", "2.75"),
            line("12", "i-other", "0.000000000000001"),
        ],
    )
    manage("import_billing", str(bill), database=database)

    # The shell may say what it imported first; the pages are the last line.
    pages = json.loads(manage("shell", database=database, stdin=PAGES).stdout.splitlines()[-1])

    assert {name: status for name, (status, _) in pages.items() if status} == {
        "overview": 200,
        "overview_partial": 200,
        "project": 200,
        "model": 200,
        "experiment": 200,
        "deployment": 200,
        "unattributed": 200,
        "export": 200,
        "claim": 200,
    }
    # 12.50 + 7.25 + 2.75 + 0.000000000000001: the smallest line survives SQLite too.
    assert '<p class="figure" id="period-total">$22.50</p>' in pages["overview"][1]
    assert pages["overview_partial"][1].lstrip().startswith('<div id="spend"')
    assert '<p class="figure" id="period-total">$12.50</p>' in pages["experiment"][1]
    assert '<p class="figure" id="unattributed-total">$10.00</p>' in pages["unattributed"][1]
    assert "Image ranking,Vision,USD,12.50,1.00,1.00" in pages["export"][1]
    assert "$10.00 of unattributed spend moves there" in pages["claim"][1]
    assert '<p class="figure" id="unattributed-total">$0.00</p>' in pages["after"][1]
    assert "No traffic reported yet" in pages["deployment"][1]
    assert "<dt>Requests</dt><dd>1,200</dd>" in pages["traffic"][1]
