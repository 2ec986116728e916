"""Benchmark: server time of the GPU pages against a trivial Django view, same run.

Run against a database bench/attribution_org.py filled (10,701 GPUs, 1.09M GPU-hours at scale 1):

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cs_bench_copy \\
        python bench/gpu_pages.py --requests 40 --runs 3

The fleet page (every range preset, staff and a team lead, full and the htmx partial a filter
change fetches), a GPU's page (its default week, 30 days by hour, 12 months and all time by
day), the page of a GPU whose instance carries findings (the busiest carries none) and the
hosts page, through Django's test client in this process
(as bench/attribution_pages.py: Django's and the database's time, no network, no browser).

- warm: `--requests` requests in a row after 3 warm-ups;
- after an import: the first request after new GPU-hours and the findings recompute they start:
  before each of `--cold` requests the day of the latest GPU-hour is marked out of date and
  rebuilt, as a GPU import does before it commits, and the findings' version is bumped, as the
  recompute does, so the request finds the rollup current and the findings' figures cold;
- cold: the same, but the day is only marked, so the request rebuilds that day of the rollup
  (and its month) itself (an import rebuilds it before it commits, so a real first request
  finds it done: this is the worse case);
- after a registration (the fleet pages and a GPU's page): before each of `--cold` requests a
  run of the project registers the instance of one of its GPUs, or drops it again (through the
  service, as the API does: the `ownership_changed` port marks that instance's GPUs and, as
  they are few, rebuilds their rows before the registration commits), and the work its commit
  queued is dropped (the process runs no worker, CELERY_TASK_ALWAYS_EAGER=false): the request
  finds the rollup current and a new build of it, so it computes the page afresh;
- the rebuild of the whole daily rollup (what a change of a host mapping costs, in a task after
  the commit, or on the first page if it comes first), timed once a run.

Reported per page: median, p95 and worst in ms over the runs (the median and worst of the runs'
medians and p95s), as a ratio to the trivial view's of the same run, and the queries of one
request.
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
# The work a registration queues goes to the broker, not run here; it is dropped (purged).
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "false")

from bench.attribution_pages import HTMX, _urlpatterns  # noqa: E402

urlpatterns = []  # set in main(), as bench/attribution_pages.py does


def _time(client, url, headers, before=None) -> float:
    if before is not None:
        before()
    started = time.perf_counter()
    response = client.get(url, headers=headers or {})
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (url, response.status_code)
    return elapsed


def _p95(times: list[float]) -> float:
    times = sorted(times)
    return times[ceil(0.95 * len(times)) - 1]


def measure(
    client, url, *, headers, requests: int, cold: int, mark, imported, registered=None
) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(3):
        _time(client, url, headers)
    with CaptureQueriesContext(connection) as captured:
        client.get(url, headers=headers or {})
    queries = len(captured)
    warm = [_time(client, url, headers) for _ in range(requests)]
    after = [_time(client, url, headers, before=imported) for _ in range(cold)]
    colds = [_time(client, url, headers, before=mark) for _ in range(cold)]
    registrations = (
        [_time(client, url, headers, before=registered) for _ in range(cold)] if registered else []
    )
    out = {"url": url, "queries": queries}
    kinds = (("warm", warm), ("imported", after), ("cold", colds), ("registered", registrations))
    for kind, times in kinds:
        if times:
            out |= {
                f"{kind}_median_ms": statistics.median(times),
                f"{kind}_p95_ms": _p95(times),
                f"{kind}_worst_ms": max(times),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--cold", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gpu")
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    import django

    django.setup()
    # The process as gunicorn serves it: costsite.wsgi imports every view and freezes what
    # start-up made (gc.freeze), so a full collection does not walk it during a request.
    importlib.import_module("costsite.wsgi")
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models import Count
    from django.test import Client, override_settings
    from django.urls import reverse

    from apps.accounts.models import Membership
    from apps.experiments.models import Experiment
    from apps.gpu import daily
    from apps.gpu.models import Gpu, GpuDay, GpuHour, GpuModelDay, GpuMonth, GpuSegment
    from apps.gpu.resolution import gpu_resolutions
    from apps.insights.models import Finding
    from apps.projects.models import Project
    from apps.projects.services import resource_uses_replace
    from apps.spend.figures import findings_version_bump
    from costsite.celery import app as celery_app

    module = sys.modules[__name__]
    module.urlpatterns = _urlpatterns()
    storages = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    with override_settings(ROOT_URLCONF=__name__, STORAGES=storages):
        started = time.perf_counter()
        daily.days_mark()
        daily.days_ensure()
        first_build_s = time.perf_counter() - started

        def vacuumed():
            """The rebuilt rollup vacuumed and analysed, as autovacuum does soon after a whole
            rebuild. Without it (autovacuum off on a benchmark machine) the planner guessed 50
            GPU-days for a year's 51,568 and joined each to its GPU one at a time, and after
            three rebuilds read 106,000 dead model-days for 5,000 live ones; and the segments,
            rewritten too, were guessed at twice their rows, so a day's rebuild hashed them in
            parallel (15 ms against 6 once analysed)."""
            if connection.vendor == "postgresql":
                tables = ", ".join(
                    model._meta.db_table for model in (GpuDay, GpuModelDay, GpuMonth, GpuSegment)
                )
                with connection.cursor() as cursor:
                    cursor.execute(f"VACUUM ANALYZE {tables}")

        vacuumed()
        users = get_user_model().objects
        staff = users.get(username="bench-staff")
        project = Project.objects.get(slug="vision-0")
        lead = Membership.objects.get(team_id=project.team_id, role="lead").user
        latest = GpuHour.objects.order_by("-hour").values_list("hour", flat=True).first()
        last_day = latest.date()

        def mark():
            daily.days_mark(start=last_day, end=daily.day_after(latest))

        def imported():
            mark()
            daily.days_ensure()
            findings_version_bump()

        busiest = (
            GpuDay.objects.filter(projects__contains=f",{project.pk},")
            .values_list("gpu_id", flat=True)
            .order_by("-day")
            .first()
        )
        # A run of the project registers the instance of its busiest GPU, then drops it, and so
        # on: each change announces that instance (one run, so registrations do not pile up on
        # the GPU from one request to the next).
        instance = gpu_resolutions(gpus=[Gpu.objects.get(pk=busiest)])[busiest].resource_id
        run_like = Experiment.objects.filter(project=project).order_by("pk").first()
        bench_run, _ = Experiment.objects.get_or_create(
            project=project,
            name="bench registration",
            defaults={
                "kind": run_like.kind,
                "status": run_like.status,
                "started_at": run_like.started_at,
                "ended_at": run_like.ended_at,
            },
        )

        def registered():
            held = bench_run.resources.exists()
            resource_uses_replace(uses=bench_run.resources, resource_ids=[] if held else [instance])
            celery_app.control.purge()  # no worker: the request finds the GPUs marked

        # A GPU whose instance carries findings (the busiest has none): the one of the lead's
        # team whose instance has the most, its section ranked and summed after a recompute.
        with_findings = (
            Finding.objects.filter(project__team_id=project.team_id, resource_id__contains="/i-")
            .values("resource_id")
            .annotate(findings=Count("id"))
            .order_by("-findings", "resource_id")
            .first()
        )
        if with_findings is None:
            raise SystemExit(f"No finding of {project.team} is on an instance: build the org anew")
        flagged = (
            Gpu.objects.filter(host=with_findings["resource_id"].rsplit("/", 1)[1])
            .order_by("pk")
            .first()
        )
        if flagged is None:
            raise SystemExit(f"No GPU reports from {with_findings['resource_id']}")
        print(f"the GPU with findings: {flagged.pk}, {with_findings['findings']} on its instance")
        resolved = gpu_resolutions(gpus=[flagged])[flagged.pk].resource_id
        assert resolved == with_findings["resource_id"], f"{flagged} resolves to {resolved}"
        fleet = reverse("gpu_fleet")
        pages = [("trivial view", reverse("bench_trivial"), False, "staff")]
        for who in ("staff", "lead"):
            for preset in ("7d", "30d", "90d", "12m", "all"):
                pages.append((f"fleet {preset} ({who})", f"{fleet}?preset={preset}", True, who))
            pages.append(
                (f"fleet 30d by GPU use, page 3 ({who})", f"{fleet}?sort=util&page=3", True, who)
            )
            gpu_page = reverse("gpu_detail", args=[busiest])
            pages.append((f"a GPU's page ({who})", gpu_page, True, who))
            # Its longest range charted by hour, and two charted by day.
            for preset in ("30d", "12m", "all"):
                pages.append(
                    (f"a GPU's page {preset} ({who})", f"{gpu_page}?preset={preset}", True, who)
                )
            pages.append(
                (
                    f"a GPU's page with findings ({who})",
                    reverse("gpu_detail", args=[flagged.pk]),
                    True,
                    who,
                )
            )
            pages.append((f"hosts page ({who})", reverse("gpu_host_mapping_list"), False, who))
        pages = [page for page in pages if page is pages[0] or args.only in page[0]]
        clients = {"staff": Client(), "lead": Client()}
        clients["staff"].force_login(staff)
        clients["lead"].force_login(lead)
        runs, rebuilds = [], []
        for run in range(args.runs):
            results = []
            for name, url, has_partial, who in pages:
                variants = [("full", None)] + ([("htmx partial", HTMX)] if has_partial else [])
                for variant, headers in variants:
                    cold = args.cold if name != "trivial view" else 0
                    result = measure(
                        clients[who],
                        url,
                        headers=headers,
                        requests=args.requests,
                        cold=cold,
                        mark=mark,
                        imported=imported,
                        registered=registered if "fleet" in name or "GPU's" in name else None,
                    )
                    result.update(page=name, variant=variant)
                    results.append(result)
                    print(
                        f"run {run + 1} {name:38} {variant:13} warm p95 "
                        f"{result['warm_p95_ms']:8.1f} ms  after an import p95 "
                        f"{result.get('imported_p95_ms', 0):8.1f} ms  cold p95 "
                        f"{result.get('cold_p95_ms', 0):8.1f} ms  after a registration p95 "
                        f"{result.get('registered_p95_ms', 0):8.1f} ms  "
                        f"{result['queries']:3} queries",
                        flush=True,
                    )
            started = time.perf_counter()
            daily.days_mark()
            daily.days_ensure()
            rebuilds.append(time.perf_counter() - started)
            vacuumed()
            runs.append(results)
    # Per page and variant: the median and the worst over the runs, and ratios to the same run's
    # trivial view.
    rows = []
    for index, first in enumerate(runs[0]):
        entry = {"page": first["page"], "variant": first["variant"], "queries": first["queries"]}
        for kind in ("warm", "imported", "cold", "registered"):
            if f"{kind}_p95_ms" not in first:
                continue
            p95s = [run[index][f"{kind}_p95_ms"] for run in runs]
            medians = [run[index][f"{kind}_median_ms"] for run in runs]
            worsts = [run[index][f"{kind}_worst_ms"] for run in runs]
            ratios = [run[index][f"{kind}_p95_ms"] / run[0]["warm_p95_ms"] for run in runs]
            entry |= {
                f"{kind}_median_ms": round(statistics.median(medians), 1),
                f"{kind}_p95_ms": round(statistics.median(p95s), 1),
                f"{kind}_p95_worst_ms": round(max(p95s), 1),
                f"{kind}_worst_ms": round(max(worsts), 1),
                f"{kind}_p95_ratio": round(statistics.median(ratios), 1),
                f"{kind}_p95_ratio_worst": round(max(ratios), 1),
            }
        rows.append(entry)
    summary = {
        "gpus": Gpu.objects.count(),
        "gpu_hours": GpuHour.objects.count(),
        "gpu_days": GpuDay.objects.count(),
        "gpu_months": GpuMonth.objects.count(),
        "runs": args.runs,
        "requests": args.requests,
        "cold_requests": args.cold,
        "first_build_s": round(first_build_s, 2),
        "full_rebuild_s": [round(value, 2) for value in rebuilds],
        "rows": rows,
        "raw": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-pages.json").write_text(json.dumps(summary, indent=2, default=str))
    print(
        f"\n{summary['gpus']} GPUs, {summary['gpu_hours']} GPU-hours, {summary['gpu_days']} "
        f"GpuDay rows, {summary['gpu_months']} GpuMonth rows; full rebuild "
        f"{summary['full_rebuild_s']} s"
    )
    print(
        "\n| page | variant | queries | warm median / p95 (worst p95) ms | warm p95 × trivial "
        "(worst) | after an import: median / p95 (worst p95) ms | × trivial (worst) | cold, "
        "the request rebuilds: median / p95 (worst p95) ms | × trivial (worst) | after a "
        "registration: median / p95 (worst p95) ms | × trivial (worst) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        cells = [
            f"{r[f'{kind}_median_ms']} / {r[f'{kind}_p95_ms']} ({r[f'{kind}_p95_worst_ms']}) | "
            f"{r[f'{kind}_p95_ratio']} ({r[f'{kind}_p95_ratio_worst']})"
            if f"{kind}_p95_ms" in r
            else "– | –"
            for kind in ("warm", "imported", "cold", "registered")
        ]
        print(f"| {r['page']} | {r['variant']} | {r['queries']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
