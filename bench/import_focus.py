"""Benchmark: import FOCUS files of 1M and 3M rows end to end, against PostgreSQL's own COPY.

For each size it writes (once) a realistic FOCUS CSV with bench/focus_generate.py's generator,
then, in the same run and alternating, several times:
- the floor: PostgreSQL's COPY of that file into a plain table of text columns, both as the
  server reading the file itself and as a client streaming it (psql's \\copy); the faster counts;
- the import: a fresh process runs the billing service on the file (parse, validate, attribute,
  load, roll up) into empty billing tables, and reports its time and peak memory (ru_maxrss,
  every thread of the process).
It prints rows per second, the ratio to COPY and the peak memory (medians of the repeats), and
checks that the import's totals equal the text table's sums.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench python bench/import_focus.py
    ... --rows 1000000 --repeat 5 --data-dir /tmp/costsite-bench

Goal (issue 3): within 2x of COPY, peak memory under 300 MB at both sizes.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

GOAL_RATIO = 2.0


def process_cpu(pid: int) -> float | None:
    """CPU seconds a process has used (PostgreSQL's backend on this machine), when readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


GOAL_MEMORY_MB = 300
BILLING_TABLES = (
    "billing_costlineitem, billing_dailycost, billing_dailyresourcecost, billing_delivery, "
    "billing_importrun"
)


def compile_sources(checkout: Path = ROOT) -> None:
    """Write the bytecode of the checkout's own modules, as a user's first run does. Where
    PYTHONDONTWRITEBYTECODE is set (as on the machine these figures come from), every fresh
    process would otherwise compile them again: about 0.3 s of each start."""
    import compileall

    for folder in ("apps", "costsite", "bench"):
        compileall.compile_dir(checkout / folder, quiet=1)


def child(path: str) -> None:
    """Run one import in this (fresh) process and print what it took as JSON."""
    import django

    django.setup()
    from django.db import connection

    from apps.billing.services import import_run_create, import_run_execute

    run = import_run_create(paths=[path])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    backend_before = process_cpu(backend)
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    run = import_run_execute(import_run=run)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    backend_after = process_cpu(backend)
    peak = usage.ru_maxrss / 1024
    client_cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
    from django.db.models import Sum

    from apps.billing.models import DailyCost

    rolled = DailyCost.objects.aggregate(
        lines=Sum("line_items"), billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    print(
        json.dumps(
            {
                "status": run.status,
                "error": run.error,
                "seconds": seconds,
                "peak_mb": peak,
                "client_cpu": client_cpu,
                "backend_cpu": None if backend_before is None else backend_after - backend_before,
                "rollup": [rolled["lines"], str(rolled["billed"]), str(rolled["effective"])],
                "rows": run.rows_done,
                "line_items": run.line_items,
                "billed_cost": run.billed_cost,
                "effective_cost": run.effective_cost,
            }
        )
    )


def import_once(path: Path) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {BILLING_TABLES} CASCADE")
        cursor.execute("CHECKPOINT")
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the import process failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["status"] != "succeeded":
        raise SystemExit(f"the import did not succeed: {result['error']}")
    return result


def copy_once(path: Path, header: list[str]) -> dict:
    """Seconds for the server reading the file itself and for a client streaming it."""
    import psycopg
    from django.db import connection
    from psycopg import sql

    dsn = connection.settings_dict
    conninfo = (
        f"host={dsn['HOST'] or '127.0.0.1'} port={dsn['PORT'] or 5432} "
        f"dbname={dsn['NAME']} user={dsn['USER']}"
        + (f" password={dsn['PASSWORD']}" if dsn.get("PASSWORD") else "")
    )
    columns = ", ".join(f'"{name}" text' for name in header)
    times = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for how in ("server", "client"):
            conn.execute("DROP TABLE IF EXISTS bench_focus_text")
            conn.execute(f"CREATE TABLE bench_focus_text ({columns})")
            conn.execute("CHECKPOINT")
            started = time.perf_counter()
            cpu_before = process_cpu(backend)
            if how == "server":
                try:
                    conn.execute(
                        sql.SQL(
                            "COPY bench_focus_text FROM {} WITH (FORMAT csv, HEADER true)"
                        ).format(sql.Literal(str(path.resolve())))
                    )
                except psycopg.Error as exc:  # not a superuser, or not the same machine
                    print(f"  (server-side COPY unavailable: {exc.__class__.__name__})")
                    continue
            else:
                with (
                    conn.cursor() as cursor,
                    cursor.copy(
                        "COPY bench_focus_text FROM STDIN WITH (FORMAT csv, HEADER true)"
                    ) as copy,
                    path.open("rb") as handle,
                ):
                    while chunk := handle.read(1 << 20):
                        copy.write(chunk)
            times[how] = time.perf_counter() - started
            if cpu_before is not None:
                times[f"{how}_cpu"] = process_cpu(backend) - cpu_before
        sums = conn.execute(
            'SELECT count(*), sum("BilledCost"::numeric), sum("EffectiveCost"::numeric) '
            "FROM bench_focus_text"
        ).fetchone()
        conn.execute("DROP TABLE bench_focus_text")
    return {**times, "sums": sums}


def main() -> None:
    parser = argparse.ArgumentParser(description="FOCUS import against PostgreSQL's COPY.")
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    # Outside the repository, and where the database server may read the file for its COPY.
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench.focus_bill import focus_benchmark_write

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark needs PostgreSQL: set DATABASE_URL.")
    call_command("migrate", verbosity=0)
    print(
        f"PostgreSQL {connection.pg_version // 10000}, {os.cpu_count()} CPUs, "
        f"database {connection.settings_dict['NAME']}"
    )
    compile_sources()
    lines = []
    for rows in args.rows:
        path = args.data_dir / f"focus-{rows}.csv"
        if not path.exists():
            started = time.perf_counter()
            focus_benchmark_write(path, rows=rows)
            print(
                f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in "
                f"{time.perf_counter() - started:.0f} s"
            )
        path.chmod(0o644)  # the server reads it for its own COPY
        header = path.open().readline().strip().split(",")
        copies, imports = [], []
        for attempt in range(args.repeat):
            copies.append(copy_once(path, header))
            imports.append(import_once(path))
            floor = min(t for k, t in copies[-1].items() if k in ("server", "client"))
            cpu = ""
            if imports[-1]["backend_cpu"] is not None and "server_cpu" in copies[-1]:
                cpu = (
                    f"; CPU s: COPY {copies[-1]['server_cpu']:.1f}, import "
                    f"{imports[-1]['client_cpu']:.1f} here + {imports[-1]['backend_cpu']:.1f} "
                    "in PostgreSQL"
                )
            print(
                f"  {rows:>9,} rows, try {attempt + 1}: COPY {floor:6.1f} s, import "
                f"{imports[-1]['seconds']:6.1f} s ({imports[-1]['seconds'] / floor:.2f}x), "
                f"peak {imports[-1]['peak_mb']:.0f} MB{cpu}",
                flush=True,
            )
        count, billed, effective = copies[-1]["sums"]
        last = imports[-1]
        assert last["rows"] == count == rows, (last["rows"], count)
        assert Decimal(last["billed_cost"]["USD"]) == billed, (last["billed_cost"], billed)
        assert Decimal(last["effective_cost"]["USD"]) == effective
        assert last["rollup"][0] == rows, last["rollup"]
        assert (Decimal(last["rollup"][1]), Decimal(last["rollup"][2])) == (billed, effective)
        print(
            f"  totals checked: {rows:,} rows, billed {billed}, spend {effective}, in the "
            "line items and the daily rollup alike"
        )
        floors = [min(t for k, t in c.items() if k in ("server", "client")) for c in copies]
        floor = statistics.median(floors)
        took = statistics.median(i["seconds"] for i in imports)
        best = min(i["seconds"] / f for i, f in zip(imports, floors, strict=True))
        peak = max(i["peak_mb"] for i in imports)
        lines.append((rows, floor, took, best, peak))
    print()
    print(
        f"{'rows':>10} {'COPY s':>8} {'COPY rows/s':>12} {'import s':>9} "
        f"{'import rows/s':>14} {'ratio':>6} {'best':>6} {'peak MB':>8}"
    )
    for rows, floor, took, best, peak in lines:
        print(
            f"{rows:>10,} {floor:>8.1f} {rows / floor:>12,.0f} {took:>9.1f} "
            f"{rows / took:>14,.0f} {took / floor:>5.2f}x {best:>5.2f}x {peak:>8.0f}"
        )
    ok = all(
        took / floor <= GOAL_RATIO and peak < GOAL_MEMORY_MB for _, floor, took, _, peak in lines
    )
    print(
        f"\ngoal: within {GOAL_RATIO}x of COPY and under {GOAL_MEMORY_MB} MB at every size: "
        f"{'met' if ok else 'NOT met'} (ratio: of the medians of {args.repeat} tries; best: the "
        "best try, the least disturbed by other work on the machine; peak: the highest)"
    )


if __name__ == "__main__":
    main()
