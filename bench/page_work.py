"""Benchmark: the work a cold spend page does, counted rather than timed.

On a shared machine a page's time moves by half from one run to the next, more than most changes
move it. This counts what does not move: for one cold request of each page (the data version
bumped first, as bench/attribution_pages.py's *cold* and as an import's commit bumps it: what
shows no spend, a project's runs, stays cached, as it does after an import), the Python
function calls it makes (cProfile's count) and the PostgreSQL buffers its statements touch (the
shared blocks of each SELECT run again under EXPLAIN ANALYZE BUFFERS, after the request, so the
request's own time is not measured here), and its queries. Run it on the code before and after
a change, against the same database bench/attribution_org.py filled:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/page_work.py --label after

It is not what a user waits for (bench/attribution_pages.py times that); it says which part of
the wait a change cut. Results go to bench/out/attribution/work-<label>.json.
"""

import argparse
import cProfile
import json
import os
import pstats
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ["DJANGO_DEBUG"] = "false"
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))

PAGES = [
    ("overview, last 30 days (staff)", "staff", "/?preset=30d"),
    ("overview, last 90 days (staff)", "staff", "/?preset=90d"),
    ("overview, last 12 months (staff)", "staff", "/?preset=12m"),
    ("overview, all time (staff)", "staff", "/?preset=all"),
    ("overview, last 12 months (lead)", "lead", "/?preset=12m"),
    ("project page", "staff", "/projects/vision-0/"),
    ("project page, all time", "staff", "/projects/vision-0/?preset=all"),
    ("project page (lead)", "lead", "/projects/vision-0/"),
]


def count(client, url: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.spend.figures import version_bump

    for _ in range(3):  # warm Python's and PostgreSQL's own caches, as a running server has them
        version_bump()
        client.get(url)
    version_bump()
    profile = cProfile.Profile()
    with CaptureQueriesContext(connection) as captured:
        profile.enable()
        response = client.get(url)
        profile.disable()
    assert response.status_code == 200, (url, response.status_code)
    buffers = 0
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "(SELECT", "WITH")):
                continue  # cursors declared for iteration, updates: not a plan of their own
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0][0]["Plan"]
            buffers += plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    return {
        "calls": pstats.Stats(profile).total_calls,
        "buffers": buffers,
        "queries": len(captured),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "attribution")
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    from apps.accounts.models import Membership
    from apps.projects.models import Project

    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        project = Project.objects.get(slug="vision-0")
        clients = {"staff": Client(), "lead": Client()}
        clients["staff"].force_login(get_user_model().objects.get(username="bench-staff"))
        lead = Membership.objects.get(team_id=project.team_id, role="lead").user
        clients["lead"].force_login(lead)
        results = []
        for name, who, url in PAGES:
            result = {"page": name, "url": url, **count(clients[who], url)}
            results.append(result)
            print(
                f"{name:34} {result['calls']:8,} calls {result['buffers']:7,} buffers "
                f"{result['queries']:3} queries",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"work{'-' + args.label if args.label else ''}.json"
    (args.out / name).write_text(json.dumps({"label": args.label, "pages": results}, indent=2))


if __name__ == "__main__":
    main()
