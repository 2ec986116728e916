"""Benchmark: a cold spend page with its heaviest figures on the figures thread, and without.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/figure_threads.py --requests 100

The pages that hand figures to the figures thread (apps/spend/figures.py, `in_background`: the
overview, a project's page, a model's page) are requested cold, the data version bumped before
each request outside the timing as in bench/attribution_pages.py, with `SPEND_FIGURE_THREADS` 1
and 0 alternately, request by request (in turn ABBA, so neither always goes first), through
Django's test client in this process. Alternating within one run compares the two on the same
machine load, which moves a page's time on this shared machine more than the change does
between two runs. Reported per page: median and p95 of each, and the ratio of the medians.
Results go to bench/out/attribution/figure-threads.json.
"""

import argparse
import importlib
import json
import os
import secrets
import statistics
import sys
import time
from math import ceil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
os.environ["DJANGO_DEBUG"] = "false"
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "600")

HTMX = {"HX-Request": "true", "HX-Target": "spend"}


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[ceil(0.95 * len(ordered)) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="Timed requests of each.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "attribution")
    args = parser.parse_args()

    import django

    django.setup()
    importlib.import_module("costsite.wsgi")  # as gunicorn serves it
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from django.urls import reverse

    from apps.accounts.models import Membership
    from apps.experiments.models import Experiment
    from apps.projects.models import Project
    from apps.spend.figures import version_bump

    # The objects bench/attribution_pages.py measures.
    project = Project.objects.get(slug="vision-0")
    model = (
        Experiment.objects.filter(project=project, kind="training", resources__isnull=False)
        .exclude(model=None)
        .order_by("pk")
        .first()
        .model
    )
    staff = get_user_model().objects.get(username="bench-staff")
    lead = Membership.objects.get(team_id=project.team_id, role="lead").user
    home, project_url = reverse("home"), reverse("project_detail", args=[project.slug])
    model_url = reverse("model_detail", args=[model.pk])
    pages = [
        *(
            (f"overview, {label} ({who})", who, f"{home}?preset={preset}", None)
            for who in ("staff", "lead")
            for preset, label in [("30d", "30 days"), ("90d", "90 days"), ("12m", "12 months")]
        ),
        ("overview, 90 days (staff), htmx partial", "staff", f"{home}?preset=90d", HTMX),
        ("project page", "staff", project_url, None),
        ("project page, all time", "staff", f"{project_url}?preset=all", None),
        ("project page (lead)", "lead", project_url, None),
        ("model page", "staff", model_url, None),
        ("model page, htmx partial", "staff", model_url, HTMX),
    ]
    clients = {"staff": Client(), "lead": Client()}
    clients["staff"].force_login(staff)
    clients["lead"].force_login(lead)
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    results = []
    with override_settings(STORAGES=storages):
        for name, who, url, headers in pages:
            client, times = clients[who], {1: [], 0: []}
            for turn in range(args.requests + 4):  # four warm-up turns, not timed
                for threads in (1, 0) if turn % 2 else (0, 1):
                    with override_settings(SPEND_FIGURE_THREADS=threads):
                        version_bump()
                        started = time.perf_counter()
                        response = client.get(url, headers=headers or {})
                        elapsed = (time.perf_counter() - started) * 1000
                    assert response.status_code == 200, (url, response.status_code)
                    if turn >= 4:
                        times[threads].append(elapsed)
            result = {
                "page": name,
                "url": url,
                "with_thread": {
                    "median_ms": round(statistics.median(times[1]), 2),
                    "p95_ms": round(p95(times[1]), 2),
                },
                "without": {
                    "median_ms": round(statistics.median(times[0]), 2),
                    "p95_ms": round(p95(times[0]), 2),
                },
            }
            result["median_ratio"] = round(
                result["with_thread"]["median_ms"] / result["without"]["median_ms"], 3
            )
            results.append(result)
            print(
                f"{name:42} with the thread: median {result['with_thread']['median_ms']:6.1f} "
                f"p95 {result['with_thread']['p95_ms']:6.1f} ms   without: median "
                f"{result['without']['median_ms']:6.1f} p95 {result['without']['p95_ms']:6.1f} ms"
                f"   {result['median_ratio']:.2f}x",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "figure-threads.json").write_text(
        json.dumps({"requests": args.requests, "pages": results}, indent=2)
    )


if __name__ == "__main__":
    main()
