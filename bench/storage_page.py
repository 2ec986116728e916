"""Benchmark: server time of the storage and egress page against a trivial Django view, same run.

Run against a migrated copy of a database bench/attribution_org.py filled (the migration that
added the storage rollup backfills it from the line items already there):

    createdb -h 127.0.0.1 -U postgres -T costsite_bench cs_storage_10m
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_storage_10m python manage.py migrate
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_storage_10m \\
        python bench/storage_page.py --requests 100

The page (all projects as staff, the last 90 and 365 days; one project, with its budget
crossing; a team lead's) is requested after 5 warm-ups, through Django's test client in this
process, with bench/attribution_pages.py's method: the trivial view is a login-required view
that returns "ok", behind the same middleware; each page twice, as bench/attribution_pages.py
does: *warm*, the same request again with nothing changed (its figures come from the cache of
the spend data version), and *cold*, the first request after a change of data (the version is
bumped before every request, outside the timing, so every figure is computed). Reported per page
and mode are median and p95 in milliseconds, both as a ratio to the trivial view's, and the SQL
queries of one request; `--runs 3` repeats it all and prints each cell's median over the runs
with the worst run's p95 (bench/attribution_pages.py's table).
Goal (issue 18): p95 within 25x the trivial view's at 10M line items.
"""

import argparse
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import attribution_pages  # noqa: E402  (sets the environment as that benchmark does)

GOAL = 25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1, help="Repeat everything this many times.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "storage")
    args = parser.parse_args()

    import django

    django.setup()
    # The process as gunicorn serves it: costsite.wsgi imports every view and freezes what
    # start-up made (gc.freeze), so a full collection does not walk it during a request.
    importlib.import_module("costsite.wsgi")
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from django.urls import reverse

    from apps.accounts.models import Membership
    from apps.billing.models import CostLineItem, DailyStorageCost
    from apps.projects.models import Project

    module = sys.modules[attribution_pages.__name__]
    module.urlpatterns = attribution_pages._urlpatterns()
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(ROOT_URLCONF=attribution_pages.__name__, STORAGES=storages):
        staff = get_user_model().objects.get(username="bench-staff")
        project = Project.objects.get(slug="vision-0")
        lead = Membership.objects.get(team_id=project.team_id, role="lead").user
        storage = reverse("storage")
        pages = [
            ("trivial view", reverse("bench_trivial")),
            ("storage, 90 days (staff)", storage),
            ("storage, 365 days (staff)", storage + "?days=365"),
            ("storage, one project", storage + f"?project={project.slug}"),
            ("storage (team lead)", storage),
        ]
        staff_client, lead_client = Client(), Client()
        staff_client.force_login(staff)
        lead_client.force_login(lead)
        runs = []
        for run in range(1, args.runs + 1):
            if args.runs > 1:
                print(f"-- run {run} of {args.runs}", flush=True)
            results = []
            for name, url in pages:
                client = lead_client if "lead" in name else staff_client
                for mode in ("warm", "cold") if name != "trivial view" else ("warm",):
                    result = attribution_pages.measure(
                        client, url, requests=args.requests, cold=mode == "cold"
                    )
                    result.update(page=name, variant="full", mode=mode)
                    results.append(result)
                    print(
                        f"{name:30} {mode:4} median {result['median_ms']:8.2f} ms  "
                        f"p95 {result['p95_ms']:8.2f} ms  {result['queries']:3} queries",
                        flush=True,
                    )
            base = results[0]
            for result in results:
                result["median_ratio"] = round(result["median_ms"] / base["median_ms"], 1)
                result["p95_ratio"] = round(result["p95_ms"] / base["p95_ms"], 1)
            runs.append(results)
        summary = {
            "line_items": CostLineItem.objects.count(),
            "storage_rows": DailyStorageCost.objects.count(),
            "requests": args.requests,
            "goal_p95_ratio": GOAL,
            "runs": runs,
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "storage-page.json").write_text(json.dumps(summary, indent=2))
    print(f"\n{summary['line_items']:,} line items, {summary['storage_rows']:,} storage rows")
    print(attribution_pages.table(runs))
    worst = max(r["p95_ratio"] for results in runs for r in results[1:])
    print(f"worst p95 ratio over {len(runs)} run(s): {worst} (goal: within {GOAL}x)")


if __name__ == "__main__":
    main()
