"""Benchmark: re-attribution and the allocation preview, against COPY of the same lines.

On a dedicated PostgreSQL database it imports (once, through the real import) a FOCUS file of
--rows lines written by bench/focus_generate.py's generator, sets up the bench organisation's
projects, and times:
  (a) the line-by-line dry run of a catch-all rule (`*` on the resource id: every line), what a
      tag key alias's preview runs over the lines its key tags (a rule's preview sums the lines
      in SQL instead, timed by bench/allocation_preview.py),
  (b) the same for a rule reaching about 10% of the lines (resource ids ending in 0 or 1),
  (c) a full re-attribution (attribution_refresh(), what a worker runs for an alias change) after
      the tag key alias `team` of the project dimension is added (the lines tagged with a team,
      about 70%, move from their project to the team's) or removed again (they move back),
      --runs times, alternating;
and, as the physical limit right before each, psql's `COPY (SELECT <the columns it reads> FROM
billing_costlineitem WHERE <the same lines>) TO STDOUT` into /dev/null (ratio = our time / COPY
time; every column of every line for (c)). Before each re-attribution the line table is
compacted and analysed (VACUUM FULL ANALYZE, untimed), as it is after an import: each run
rewrites 700,000 lines, and their dead versions, or the free space a plain VACUUM leaves, slow
the floor more than the run (a floor measured on a bloated table flatters the ratio).

What (c) leaves out: the worker picking the task up, and the findings recompute that the change
of spend data enqueues on the insights queue (muted here; bench/findings_recompute.py times it).
What it checks: the spend per currency is conserved; the spend each project gained or lost in
the rollups equals what the run recorded as moved; the lines and the daily rollup agree per
project. The readers `orm` (the ORM's values_list) and `copy` (COPY ... TO STDOUT in CSV parsed
by Arrow, the default) may be compared with --readers. It prints a table and writes JSON to
bench/out/reattribution/.

    createdb -h 127.0.0.1 -U postgres costsite_bench_reattribution
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench_reattribution \\
        python bench/reattribution.py --rows 1000000 --data-dir /tmp/costsite-bench
"""

import argparse
import copy
import json
import os
import statistics
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
    for slug in [*BENCH_PROJECTS, *TEAM_PROJECTS]:
        Project.objects.get_or_create(slug=slug, defaults={"team": team, "name": slug.title()})
    return CostLineItem.objects.count()


# The teams bench/focus_bill.py tags lines with, as projects: the alias `team` moves lines there.
TEAM_PROJECTS = [f"team-{i}" for i in range(4)]


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
    """The line-by-line dry run over the lines a rule reaches: what an alias change's preview
    runs (a rule's preview sums the lines in SQL instead: bench/allocation_preview.py)."""
    from django.db import transaction

    from apps.billing.attribution import Attributor
    from apps.billing.services import attribution_dry_run
    from apps.billing.services_allocation import _rule_lines

    started = time.perf_counter()
    with transaction.atomic():
        copy.copy(rule).save()  # unsaved: a new rule each time
        attributor = Attributor.load()
        transaction.set_rollback(True)
    moves = attribution_dry_run(attributor=attributor, narrow=_rule_lines([rule]))
    return time.perf_counter() - started, moves.lines


def by_project() -> dict:
    from django.db.models import Sum

    from apps.billing.models import DailyCost

    return {
        (row["project_id"], row["billing_currency"]): row["total"]
        for row in DailyCost.objects.values("project_id", "billing_currency").annotate(
            total=Sum("effective_cost")
        )
    }


def check_run(before: dict, after: dict, moves) -> None:
    """Spend conserved per currency; each project's change is what the run recorded as moved;
    the lines agree with the rollup."""
    from decimal import Decimal

    from django.db.models import Sum

    from apps.billing.models import CostLineItem

    def per_currency(totals: dict) -> dict:
        out: dict = {}
        for (_, currency), amount in totals.items():
            out[currency] = out.get(currency, Decimal(0)) + amount
        return out

    if per_currency(before) != per_currency(after):
        raise SystemExit(f"spend not conserved: {per_currency(before)} -> {per_currency(after)}")
    changes = {
        key: after.get(key, Decimal(0)) - before.get(key, Decimal(0))
        for key in before.keys() | after.keys()
    }
    recorded: dict = {}
    for (direction, project, _, _, currency), (amount, _, _) in moves.rows.items():
        sign = 1 if direction == "to" else -1
        recorded[(project, currency)] = recorded.get((project, currency), Decimal(0)) + (
            sign * amount
        )
    nonzero = {k: v for k, v in changes.items() if v}
    if nonzero != {k: v for k, v in recorded.items() if v}:
        raise SystemExit(f"the rollups moved {nonzero}, the run recorded {recorded}")
    lines = {
        (row["project_id"], row["billing_currency"]): row["total"]
        for row in CostLineItem.objects.values("project_id", "billing_currency").annotate(
            total=Sum("effective_cost")
        )
    }
    if lines != after:
        raise SystemExit("the lines and the daily rollup disagree per project")


def vacuum_lines() -> None:
    subprocess.run(
        [
            "psql",
            os.environ["DATABASE_URL"],
            "-X",
            "-q",
            "-c",
            "VACUUM FULL ANALYZE billing_costlineitem",
        ],
        check=True,
    )


def refresh_once(names: list[str]) -> dict:
    """One re-attribution after the alias `team` is added or removed, checked, with its floor."""
    from apps.billing.models import CostLineItem
    from apps.billing.reattribution import Moves
    from apps.billing.services import attribution_refresh
    from apps.insights.tasks import on_spend_data_changed
    from apps.projects.models import TagKeyAlias
    from apps.projects.ports import spend_data_changed

    vacuum_lines()
    floor = copy_floor(CostLineItem.objects.order_by("id"), names)
    alias = TagKeyAlias.objects.filter(dimension="project", key="team")
    change = "removed" if alias.exists() else "added"
    with spend_data_changed.muted(on_spend_data_changed):
        if alias.exists():
            alias.delete()
        else:
            TagKeyAlias.objects.create(dimension="project", key="team")
    before = by_project()
    moves = Moves()
    with spend_data_changed.muted(on_spend_data_changed):
        started = time.perf_counter()
        moved = attribution_refresh(moves=moves)
        seconds = time.perf_counter() - started
    check_run(before, by_project(), moves)
    return {"change": change, "seconds": seconds, "moved": moved, "floor": floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument("--readers", default="copy", help="orm, copy or both (in order)")
    parser.add_argument("--runs", type=int, default=3, help="re-attributions per reader")
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    from apps.billing.models import CostLineItem
    from apps.billing.reattribution import DRY_RUN_COLUMNS
    from apps.billing.services import attribution_refresh
    from apps.billing.services_allocation import PREVIEW_MAX_LINES, _rule_lines
    from apps.projects.models import AllocationRule, Project

    if connection.vendor != "postgresql":
        raise SystemExit("PostgreSQL only: set DATABASE_URL to a dedicated database")
    total = prepare(args.rows, args.data_dir)
    # Lines imported before their projects existed: attributed once, untimed, to start even.
    attribution_refresh()
    vision = Project.objects.get(slug="vision")
    rules = {
        "a": AllocationRule(name="catch-all", field="resource_id", pattern="*", project=vision),
        "b": AllocationRule(name="tenth", field="resource_id", pattern="*[01]", project=vision),
    }
    names = ["id", *[f.column for f in CostLineItem._meta.concrete_fields if f.column != "id"]]
    vacuum_lines()
    floors = {
        key: copy_floor(_rule_lines([rule])(CostLineItem.objects.order_by("id")), DRY_RUN_COLUMNS)
        for key, rule in rules.items()
    }
    reached = {
        key: _rule_lines([rule])(CostLineItem.objects.all()).count() for key, rule in rules.items()
    }
    cases = {
        "a": "dry run, catch-all rule",
        "b": "dry run, rule reaching ~10%",
        "c": "re-attribution after an alias change",
    }
    rows = []

    def record(name, key, seconds, moved, floor, lines_read, change=""):
        row = {
            "case": cases[key],
            "change": change,
            "reader": name,
            "lines_read": lines_read,
            "lines_moved": moved,
            "seconds": round(seconds, 3),
            "lines_per_second": round(lines_read / seconds),
            "copy_seconds": round(floor, 3),
            "ratio_to_copy": round(seconds / floor, 2),
        }
        rows.append(row)
        log(
            f"{row['case']:<38} {change:<8} {name:<5} {lines_read:>10,} {moved:>9,} "
            f"{seconds:>7.1f} {row['lines_per_second']:>9,} {floor:>7.2f} "
            f"{row['ratio_to_copy']:>6.2f}"
        )

    log(
        f"{'case':<38} {'alias':<8} {'read':<5} {'lines read':>10} {'moved':>9} {'s':>7} "
        f"{'lines/s':>9} {'COPY s':>7} {'ratio':>6}"
    )
    readers = args.readers.split(",")
    for name in readers:
        with reader(name):
            for key in ("a", "b"):
                seconds, moved = preview(rules[key])
                record(name, key, seconds, moved, floors[key], reached[key])
    for name in readers:
        with reader(name):
            for _ in range(args.runs):
                run = refresh_once(names)
                record(name, "c", run["seconds"], run["moved"], run["floor"], total, run["change"])

    ratios = sorted(r["ratio_to_copy"] for r in rows if r["case"] == cases["c"])
    if ratios:
        log(
            f"\nre-attribution over COPY: median {statistics.median(ratios):.2f}x, "
            f"worst {ratios[-1]:.2f}x ({len(ratios)} runs)"
        )
    best = [r for r in rows if r["case"] == cases["a"]]
    fastest = min(best, key=lambda r: r["seconds"])
    cap = int(fastest["lines_per_second"] * PREVIEW_GOAL_SECONDS)
    log(
        f"alias preview cap now {PREVIEW_MAX_LINES:,}; {PREVIEW_GOAL_SECONDS:.0f} s of the "
        f"catch-all dry run ({fastest['reader']}) reads {cap:,} lines"
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
