"""Benchmark: reading line items for re-attribution and the allocation preview, against COPY.

On a dedicated PostgreSQL database it imports (once, through the real import) a FOCUS file of
--rows lines written by bench/focus_generate.py's generator, sets up the bench organisation's
projects (every line is then unattributed: no alias yet), and times, with each line reader
(`orm`: the ORM's values_list, Python objects per value; `copy`: COPY (SELECT ...) TO STDOUT in
CSV parsed by Arrow):
  (a) the allocation preview of a catch-all rule (`*` on the resource id: every line),
  (b) the preview of a rule reaching about 10% of the lines (resource ids ending in 0 or 1),
  (c) a full re-attribution (attribution_refresh()) after a tag key alias change: the `orm`
      reader's turn adds the alias `project` (most lines move to their project), the `copy`
      reader's turn removes it (they move back), so both write the same number of lines;
and, as the physical limit in the same run, psql's `COPY (SELECT <the same columns> FROM
billing_costlineitem WHERE <the same lines>) TO STDOUT` into /dev/null (ratio = our time / COPY
time). The preview cap is lifted while it runs. It prints a table and writes JSON to
bench/out/reattribution/.

    createdb -h 127.0.0.1 -U postgres costsite_bench_reattribution
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench_reattribution \\
        python bench/reattribution.py --rows 1000000 --data-dir /tmp/costsite-bench
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

OUT = ROOT / "bench" / "out" / "reattribution"
PREVIEW_GOAL_SECONDS = 5.0


def log(message: str) -> None:
    print(message, flush=True)


def prepare(rows: int, data_dir: Path) -> int:
    """The bench lines and projects, made once; returns how many lines there are."""
    from apps.accounts.models import Organization, Team
    from apps.billing.models import CostLineItem
    from apps.billing.services import import_run_create, import_run_execute
    from apps.projects.models import Project
    from bench.focus_bill import BENCH_PROJECTS, focus_benchmark_write

    if not CostLineItem.objects.exists():
        path = data_dir / f"focus-{rows}.csv"
        if not path.exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            log(f"writing {rows:,} FOCUS lines to {path}")
            focus_benchmark_write(path, rows=rows)
        log("importing them")
        started = time.perf_counter()
        run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
        if run.status != "succeeded":
            raise SystemExit(f"import {run.status}: {run.error}")
        log(f"  {run.line_items:,} lines in {time.perf_counter() - started:.1f} s")
    Organization.get()
    team, _ = Team.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    for slug in BENCH_PROJECTS:
        Project.objects.get_or_create(slug=slug, defaults={"team": team, "name": slug.title()})
    return CostLineItem.objects.count()


def copy_floor(queryset, names: list[str]) -> float:
    """Seconds psql takes to COPY these lines' columns (JSON as text) into /dev/null."""
    import psycopg
    from django.db import connection
    from django.db.models import TextField
    from django.db.models.functions import Cast

    fields = [f"copy_{n}" if n in ("tags", "extra") else n for n in names]
    texts = {f"copy_{n}": Cast(n, TextField()) for n in ("tags", "extra") if n in names}
    sql, params = queryset.annotate(**texts).values_list(*fields).query.sql_with_params()
    with connection.cursor() as cursor:
        statement = psycopg.ClientCursor(cursor.cursor.connection).mogrify(sql, params)
    url = os.environ["DATABASE_URL"]
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(
            ["psql", url, "-X", "-q", "-c", f"COPY ({statement}) TO STDOUT WITH (FORMAT csv)"],
            stdout=sink,
            check=True,
        )
    return time.perf_counter() - started


def reader(name: str):
    from apps.billing import reattribution

    chosen = reattribution._orm_chunk if name == "orm" else reattribution._copy_chunk
    return mock.patch.object(reattribution, "_chunk_reader", lambda: chosen)


def preview(rule) -> tuple[float, int]:
    from apps.billing import services_allocation

    with mock.patch.object(services_allocation, "PREVIEW_MAX_LINES", 10**12):
        started = time.perf_counter()
        movement = services_allocation.allocation_rule_preview(rule=rule)
        seconds = time.perf_counter() - started
    assert not movement.too_many_lines
    return seconds, movement.lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument("--readers", default="orm,copy", help="orm, copy or both (in order)")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    from apps.billing.models import CostLineItem
    from apps.billing.reattribution import DRY_RUN_COLUMNS
    from apps.billing.services import attribution_refresh
    from apps.billing.services_allocation import PREVIEW_MAX_LINES, _rule_lines
    from apps.projects.models import AllocationRule, Project, TagKeyAlias

    if connection.vendor != "postgresql":
        raise SystemExit("PostgreSQL only: set DATABASE_URL to a dedicated database")
    total = prepare(args.rows, args.data_dir)
    vision = Project.objects.get(slug="vision")
    rules = {
        "a": AllocationRule(name="catch-all", field="resource_id", pattern="*", project=vision),
        "b": AllocationRule(name="tenth", field="resource_id", pattern="*[01]", project=vision),
    }
    lines = CostLineItem.objects.order_by("id")
    names = ["id", *[f.column for f in CostLineItem._meta.concrete_fields if f.column != "id"]]
    floors = {
        key: copy_floor(_rule_lines([rule])(lines), DRY_RUN_COLUMNS) for key, rule in rules.items()
    }
    floors["c"] = copy_floor(lines, names)
    reached = {
        key: _rule_lines([rule])(CostLineItem.objects.all()).count() for key, rule in rules.items()
    }
    reached["c"] = total
    cases = {
        "a": "preview, catch-all rule",
        "b": "preview, rule reaching ~10%",
        "c": "re-attribution after an alias change",
    }
    results = []
    readers = args.readers.split(",")
    for name in readers:  # the previews first: every line is unattributed for both readers
        with reader(name):
            for key in ("a", "b"):
                seconds, moved = preview(rules[key])
                results.append((name, key, seconds, moved))
                log(f"  {name} {cases[key]}: {seconds:.1f} s")
    for name in readers:
        with reader(name):
            alias = TagKeyAlias.objects.filter(dimension="project", key="project")
            if alias.exists():
                alias.delete()
            else:
                TagKeyAlias.objects.create(dimension="project", key="project")
            started = time.perf_counter()
            moved = attribution_refresh()
            seconds = time.perf_counter() - started
            results.append((name, "c", seconds, moved))
            log(f"  {name} {cases['c']}: {seconds:.1f} s")

    rows = []
    log("")
    log(
        f"{'case':<40} {'reader':<6} {'lines read':>10} {'moved':>9} {'s':>7} "
        f"{'lines/s':>9} {'COPY s':>7} {'ratio':>6}"
    )
    for name, key, seconds, moved in results:
        row = {
            "case": cases[key],
            "reader": name,
            "lines_read": reached[key],
            "lines_moved": moved,
            "seconds": round(seconds, 3),
            "lines_per_second": round(reached[key] / seconds),
            "copy_seconds": round(floors[key], 3),
            "ratio_to_copy": round(seconds / floors[key], 2),
        }
        rows.append(row)
        log(
            f"{row['case']:<40} {name:<6} {row['lines_read']:>10,} {moved:>9,} {seconds:>7.1f} "
            f"{row['lines_per_second']:>9,} {floors[key]:>7.2f} {row['ratio_to_copy']:>6.1f}"
        )
    best = {r["reader"]: r for r in rows if r["case"] == cases["a"]}
    fastest = min(best.values(), key=lambda r: r["seconds"])
    cap = int(fastest["lines_per_second"] * PREVIEW_GOAL_SECONDS)
    log(
        f"\npreview cap now {PREVIEW_MAX_LINES:,}; {PREVIEW_GOAL_SECONDS:.0f} s of the catch-all "
        f"preview ({fastest['reader']}) reads {cap:,} lines"
    )
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report = {
        "lines": total,
        "cpus": os.cpu_count(),
        "results": rows,
        "preview_lines_in_5s": cap,
        "preview_max_lines": PREVIEW_MAX_LINES,
    }
    path = OUT / f"reattribution-{stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    log(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
