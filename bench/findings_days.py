"""A/B of the findings figures' day rollup: the pages that show findings, cold, reading the day
rollup (apps/insights/days.py) against reading the finding-hours as before, alternating request
by request in one process on the same database.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/findings_days.py --requests 5

The database needs findings: bench/attribution_org.py mutes the recompute while it imports, so
run `manage.py findings_recompute` once after it. *Cold* is the first request after a change of
data: the data version is bumped before every request (outside the timing), so every cached
figure is computed. "hours" is the same code with the rollup switched off, the path SQLite takes
(on PostgreSQL it counts once in SQL over the hours, as the pages did before the rollup). Django's
test client in this process: the time is Django's and the database's, no network, no browser.
"""

import argparse
import importlib
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ["DJANGO_DEBUG"] = "false"
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "600")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5, help="cold requests per page and path")
    args = parser.parse_args()

    import django

    django.setup()
    # The process as gunicorn serves it: costsite.wsgi imports every view and freezes what
    # start-up made (gc.freeze), so a full collection does not walk it during a request.
    importlib.import_module("costsite.wsgi")
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings

    import apps.insights.selectors as findings
    from apps.accounts.models import Membership
    from apps.insights.models import FindingDay
    from apps.projects.models import Project
    from apps.spend.figures import findings_version_bump

    if not FindingDay.objects.exists():
        sys.exit("No finding days: run manage.py findings_recompute on this database first.")
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(STORAGES=storages):
        project = Project.objects.get(slug="vision-0")
        staff, lead = Client(), Client()
        staff.force_login(get_user_model().objects.get(username="bench-staff"))
        lead.force_login(Membership.objects.get(team_id=project.team_id, role="lead").user)
        pages = [
            ("waste page (staff)", staff, "/waste/"),
            ("waste page (lead)", lead, "/waste/"),
            ("overview, 30 days (staff)", staff, "/?preset=30d"),
            ("overview, 12 months (staff)", staff, "/?preset=12m"),
            ("overview, all time (staff)", staff, "/?preset=all"),
            ("overview, 30 days (lead)", lead, "/?preset=30d"),
            ("overview, 12 months (lead)", lead, "/?preset=12m"),
            ("project page (lead)", lead, f"/projects/{project.slug}/"),
        ]
        rollup = findings.day_rollup_used
        paths = {"days": rollup, "hours": lambda: False}
        print(f"{'page':30} {'days median / worst ms':>24} {'hours median / worst ms':>25}")
        for name, client, url in pages:
            took: dict[str, list[float]] = {path: [] for path in paths}
            for _ in range(args.requests):
                for path, used in paths.items():
                    findings.day_rollup_used = used
                    findings_version_bump()  # every findings figure computed
                    clock = time.perf_counter()
                    response = client.get(url)
                    took[path].append((time.perf_counter() - clock) * 1000)
                    assert response.status_code == 200, (url, response.status_code)
            findings.day_rollup_used = rollup
            cells = [f"{statistics.median(took[p]):9.1f} / {max(took[p]):8.1f}" for p in paths]
            print(f"{name:30} {cells[0]:>24} {cells[1]:>25}", flush=True)


if __name__ == "__main__":
    main()
