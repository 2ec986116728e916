"""Benchmark: server time of the attribution pages against a trivial Django view, same run.

Run against a database bench/attribution_org.py filled:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \\
        python bench/attribution_pages.py --requests 200

Each page (the overview as staff and as a team lead, a project's page, a model's, a run's and a
deployment's, unattributed spend) is requested in full and as the htmx partial a
filter change fetches, 200 times each after 5 warm-ups, through Django's test client in this
process: the time is Django's and the database's, without a network or a browser. The trivial
view is a login-required view that returns "ok", behind the same middleware. Reported per page:
median and p95 in milliseconds, both as a ratio to the trivial view's, and the SQL queries of
one request. Settings as in production: DEBUG off, persistent database connections, and a cold
page's heaviest figures computed on the figures thread's own connection (`SPEND_FIGURE_THREADS`,
1 unless the environment says otherwise; the queries are counted with it off, on one connection).

The spend figures are cached per data version (apps/spend/figures.py) and the findings figures
per findings version, so each page is measured three ways: *warm*, the same request again with
nothing changed; *cold*, the first request after a change of spend data (the data version is
bumped before every request, outside the timing, as an import's commit bumps it: every spend
figure is computed); and *cold findings*, the first request after a change of findings (the
findings version bumped, as the recompute an import starts bumps it at its commit: every
findings figure is computed). `--runs 3` repeats the whole measurement and reports each cell's
median over the runs and the worst run.
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
# Debug off demands a real key; a throwaway one signs this run's sessions.
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "600")

HTMX = {"HX-Request": "true", "HX-Target": "spend"}
PRESETS = [("7d", "last 7 days"), ("30d", "last 30 days"), ("90d", "last 90 days")]
PRESETS += [("12m", "last 12 months"), ("all", "all time")]


def trivial(request):
    from django.http import HttpResponse

    return HttpResponse("ok")


def _urlpatterns():
    from django.contrib.auth.decorators import login_required
    from django.urls import path

    from costsite.urls import urlpatterns as site

    return [path("bench/trivial/", login_required(trivial), name="bench_trivial"), *site]


def measure(
    client, url: str, *, requests: int, headers: dict | None = None, mode: str = "warm"
) -> dict:
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext

    from apps.spend.figures import findings_version_bump, version_bump

    # Outside a transaction the bump is at once: the next request computes every spend figure
    # (cold: a change of spend, as an import's commit makes) or every findings figure (cold
    # findings: as the findings recompute the import starts makes when it commits).
    changes = {"warm": lambda: None, "cold": version_bump, "cold findings": findings_version_bump}
    change = changes[mode]
    headers = headers or {}
    for _ in range(5):
        change()
        response = client.get(url, headers=headers)
        assert response.status_code == 200, (url, response.status_code)
    change()
    # Counted with every figure on this connection: the figures thread's queries (a cold page's
    # heaviest figures, apps/spend/figures.py in_background) run on one of its own.
    with override_settings(SPEND_FIGURE_THREADS=0), CaptureQueriesContext(connection) as captured:
        client.get(url, headers=headers)
    # Counted now: the log is read lazily, and the next request empties it.
    queries = len(captured)
    times = []
    for _ in range(requests):
        change()
        started = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    times.sort()
    return {
        "url": url,
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[ceil(0.95 * len(times)) - 1], 2),
        "queries": queries,
        "bytes": len(response.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1, help="Repeat everything this many times.")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "attribution")
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--only", default="", help="Measure only the pages whose name contains this text."
    )
    parser.add_argument(
        "--modes",
        default="warm,cold,cold findings",
        help="Which of warm, cold and cold findings to measure (comma-separated).",
    )
    args = parser.parse_args()
    chosen = tuple(mode.strip() for mode in args.modes.split(","))
    unknown = set(chosen) - {"warm", "cold", "cold findings"}
    if unknown:
        parser.error(f"unknown mode: {', '.join(sorted(unknown))}")

    import django

    django.setup()
    # The process as gunicorn serves it: costsite.wsgi imports every view and freezes what
    # start-up made (gc.freeze), so a full collection does not walk it during a request.
    importlib.import_module("costsite.wsgi")
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from django.urls import reverse

    from apps.accounts.models import Membership
    from apps.billing.models import CostLineItem, DailyCost
    from apps.deployments.models import Deployment
    from apps.experiments.models import Experiment
    from apps.projects.models import Project

    module = sys.modules[__name__]
    module.urlpatterns = _urlpatterns()
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(ROOT_URLCONF=__name__, STORAGES=storages):
        users = get_user_model().objects
        staff = users.get(username="bench-staff")
        # The same objects at every scale (the generator's seed makes the same organisation):
        # the project with the heaviest share of the runs, its first training run that
        # registered its machines, that run's model, the first deployment.
        project = Project.objects.get(slug="vision-0")
        lead = Membership.objects.get(team_id=project.team_id, role="lead").user
        run = (
            Experiment.objects.filter(project=project, kind="training", resources__isnull=False)
            .exclude(model=None)
            .order_by("pk")
            .first()
        )
        deployment = Deployment.objects.order_by("pk").first()
        experiment, model = run.pk, run.model
        home = reverse("home")
        pages = [
            ("trivial view", reverse("bench_trivial"), False),
            *(
                (f"overview, {label} ({who})", f"{home}?preset={preset}", True)
                for who in ("staff", "lead")
                for preset, label in PRESETS
            ),
            ("project page", reverse("project_detail", args=[project.slug]), True),
            (
                "project page, all time",
                reverse("project_detail", args=[project.slug]) + "?preset=all",
                True,
            ),
            ("project page (lead)", reverse("project_detail", args=[project.slug]), True),
            ("model page", reverse("model_detail", args=[model.pk]), True),
            ("experiment page", reverse("experiment_detail", args=[experiment]), True),
            ("deployment page", reverse("deployment_detail", args=[deployment.pk]), True),
            ("unattributed spend", reverse("unattributed"), True),
            ("unattributed spend (lead)", reverse("unattributed"), True),
            ("projects list", reverse("project_list"), False),
        ]
        staff_client, lead_client = Client(), Client()
        staff_client.force_login(staff)
        lead_client.force_login(lead)
        pages = [page for page in pages if page is pages[0] or args.only in page[0]]
        runs = []
        for run in range(1, args.runs + 1):
            results = []
            for name, url, has_partial in pages:
                client = lead_client if "lead" in name else staff_client
                variants = [("full", None)] + ([("htmx partial", HTMX)] if has_partial else [])
                for variant, headers in variants:
                    for mode in chosen if name != "trivial view" else ("warm",):
                        result = measure(
                            client, url, requests=args.requests, headers=headers, mode=mode
                        )
                        result.update(page=name, variant=variant, mode=mode)
                        results.append(result)
                        print(
                            f"run {run} {name:36} {variant:13} {mode:13} "
                            f"median {result['median_ms']:8.2f} ms  "
                            f"p95 {result['p95_ms']:8.2f} ms  {result['queries']:3} queries",
                            flush=True,
                        )
            base = results[0]
            for result in results:
                result["median_ratio"] = round(result["median_ms"] / base["median_ms"], 1)
                result["p95_ratio"] = round(result["p95_ms"] / base["p95_ms"], 1)
            runs.append(results)
        summary = {
            "label": args.label,
            "line_items": CostLineItem.objects.count(),
            "daily_cost_rows": DailyCost.objects.count(),
            "requests": args.requests,
            "spend_figure_threads": settings.SPEND_FIGURE_THREADS,
            "runs": runs,
        }
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"pages{'-' + args.label if args.label else ''}.json"
    (args.out / name).write_text(json.dumps(summary, indent=2))
    print(table(runs))


def table(runs: list[list[dict]]) -> str:
    """Markdown: per page, variant and mode the median over the runs of the median and p95 (the
    worst run's p95 in brackets), and the p95 as a ratio to the same run's trivial view."""
    lines = [
        "| page | variant | mode | queries | median / p95 (worst p95) ms | p95 × trivial (worst) |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for position, first in enumerate(runs[0]):
        cells = [results[position] for results in runs]
        median = statistics.median(cell["median_ms"] for cell in cells)
        p95 = statistics.median(cell["p95_ms"] for cell in cells)
        worst = max(cell["p95_ms"] for cell in cells)
        ratio = statistics.median(cell["p95_ratio"] for cell in cells)
        worst_ratio = max(cell["p95_ratio"] for cell in cells)
        lines.append(
            f"| {first['page']} | {first['variant']} | {first['mode']} | {first['queries']} "
            f"| {median:.1f} / {p95:.1f} ({worst:.1f}) | {ratio:.1f} ({worst_ratio:.1f}) |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
