"""Benchmark: import a 1,000,000-row AWS CUR Parquet file (Athena flavour) against PostgreSQL's
COPY of the same rows.

It writes (once) a CUR Parquet file of hourly lines of one month, the mix a GPU-heavy account
shows: on-demand GPU and CPU instances, reserved and savings-plan usage with its negations, spot,
S3 storage, data transfer, tax; a sixth untagged. The same rows are written as CSV for the floor:
PostgreSQL's COPY (client streaming) into a plain table of text columns. Then, alternating, several
times: COPY, and a fresh process importing the Parquet file through the billing service (read,
map onto FOCUS with the amortised cost, validate, attribute, load, roll up). It prints rows per
second, the ratio to COPY and the peak memory (ru_maxrss of the importing process), and checks the
import's billed total against the text table's sum. Each import starts from empty billing tables
(they are truncated): give it a database of its own.

A resource keeps one usage type and one set of tags on all its lines, as in a real CUR.

With --command (issue 24) it times `manage.py import_billing` instead, into the database as it
is, which must hold other bills (nothing is truncated; each try's delivery is deleted again),
against (a) and the typed floor (b) of bench/import_focus.py --command.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_cur \
        python bench/import_cur_parquet.py
    ... --rows 1000000 --repeat 3 --data-dir /tmp/costsite-bench
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite_bench \
        python bench/import_cur_parquet.py --command --queued
    ... --queued   (the findings recompute each import starts is left for a worker, as compose
                    runs it; without, Celery runs it in the importing process, the default)
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

ROW_GROUP = 100_000
RESOURCES = 2_000
# The payer: a bill of its own, which replaces none a database holds (as bench/import_focus.py's).
BENCH_ACCOUNT = "990000000024"
JANUARY = datetime(2025, 1, 1, tzinfo=UTC)
HOURS = 31 * 24
# line type, usage type, product code, family, instance, term, unblended range, weight
KINDS = [
    (
        "Usage",
        "BoxUsage:p4d.24xlarge",
        "AmazonEC2",
        "Compute Instance",
        "p4d.24xlarge",
        "OnDemand",
        32.7726,
        10,
    ),
    (
        "Usage",
        "BoxUsage:m5.xlarge",
        "AmazonEC2",
        "Compute Instance",
        "m5.xlarge",
        "OnDemand",
        0.192,
        20,
    ),
    (
        "DiscountedUsage",
        "BoxUsage:g5.xlarge",
        "AmazonEC2",
        "Compute Instance",
        "g5.xlarge",
        "Reserved",
        0.0,
        10,
    ),
    (
        "SavingsPlanCoveredUsage",
        "BoxUsage:g6.xlarge",
        "AmazonEC2",
        "Compute Instance",
        "g6.xlarge",
        "OnDemand",
        0.805,
        10,
    ),
    (
        "SavingsPlanNegation",
        "BoxUsage:g6.xlarge",
        "AmazonEC2",
        "Compute Instance",
        "g6.xlarge",
        "",
        -0.805,
        10,
    ),
    (
        "Usage",
        "USE2-SpotUsage:g5.2xlarge",
        "AmazonEC2",
        "Compute Instance",
        "g5.2xlarge",
        "Spot",
        0.36,
        10,
    ),
    ("Usage", "TimedStorage-ByteHrs", "AmazonS3", "Storage", "", "OnDemand", 0.0031, 15),
    (
        "Usage",
        "DataTransfer-Out-Bytes",
        "AWSDataTransfer",
        "Data Transfer",
        "",
        "OnDemand",
        0.09,
        10,
    ),
    ("Tax", "", "AmazonEC2", "", "", "", 0.5, 5),
]
PROJECTS = ["vision", "nlp", "search", "ranking", "speech", None]


def cur_parquet_write(path: Path, csv_path: Path, *, rows: int, seed: int = 7) -> None:
    """The CUR rows as Parquet (as AWS writes them) and the same rows as CSV text."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    weights = np.array([k[-1] for k in KINDS], dtype=float)
    columns = list(zip(*KINDS, strict=True))
    # As in a real CUR, a resource is one kind of thing with one set of tags: its usage type and
    # project are drawn once, not for each of its lines.
    resource_kind = rng.choice(len(KINDS), size=RESOURCES, p=weights / weights.sum())
    resource_project = rng.integers(0, len(PROJECTS), size=RESOURCES)
    writer = None
    csv_writer = None
    try:
        for start in range(0, rows, ROW_GROUP):
            n = min(ROW_GROUP, rows - start)
            resource = rng.integers(0, RESOURCES, size=n)
            kind = resource_kind[resource]
            index = pa.array(kind)

            def pick(position: int, index=index) -> pa.Array:
                values = [v or None for v in columns[position]]
                return pa.array(values, pa.string()).take(index)

            hour = rng.integers(0, HOURS, size=n)
            starts = pa.array(
                (np.datetime64("2025-01-01T00:00:00", "ms") + hour.astype("timedelta64[h]")),
                pa.timestamp("ms"),
            ).cast(pa.timestamp("ms", tz="UTC"))
            ends = pa.array(
                (np.datetime64("2025-01-01T01:00:00", "ms") + hour.astype("timedelta64[h]")),
                pa.timestamp("ms"),
            ).cast(pa.timestamp("ms", tz="UTC"))
            base = np.array(columns[6], dtype=float)[kind]
            unblended = np.round(base * rng.uniform(0.5, 1.5, size=n), 6)
            line_type = pick(0)
            is_ri = pa.compute.equal(line_type, "DiscountedUsage")
            is_sp = pa.compute.equal(line_type, "SavingsPlanCoveredUsage")
            amortised = np.round(rng.uniform(0.2, 0.9, size=n), 6)
            project = resource_project[resource]
            table = pa.table(
                {
                    "identity_line_item_id": pa.array(
                        [f"li-{start + i}" for i in range(n)], pa.string()
                    ),
                    "bill_payer_account_id": pa.array([BENCH_ACCOUNT] * n, pa.string()),
                    "bill_billing_period_start_date": pa.array(
                        [JANUARY] * n, pa.timestamp("ms", tz="UTC")
                    ),
                    "bill_billing_period_end_date": pa.array(
                        [datetime(2025, 2, 1, tzinfo=UTC)] * n, pa.timestamp("ms", tz="UTC")
                    ),
                    "line_item_usage_account_id": pa.array(["222222222222"] * n, pa.string()),
                    "line_item_line_item_type": line_type,
                    "line_item_usage_start_date": starts,
                    "line_item_usage_end_date": ends,
                    "line_item_product_code": pick(2),
                    "line_item_usage_type": pick(1),
                    "line_item_resource_id": pa.array(
                        [f"i-{v:05d}" for v in resource.tolist()], pa.string()
                    ),
                    "line_item_usage_amount": pa.array(np.ones(n)),
                    "line_item_currency_code": pa.array(["USD"] * n, pa.string()),
                    "line_item_unblended_rate": pa.array([str(v) for v in unblended], pa.string()),
                    "line_item_unblended_cost": pa.array(unblended),
                    "product_product_family": pick(3),
                    "product_instance_type": pick(4),
                    "product_region_code": pa.array(["us-east-1"] * n, pa.string()),
                    "pricing_term": pick(5),
                    "pricing_unit": pa.array(["Hrs"] * n, pa.string()),
                    "reservation_reservation_a_r_n": pa.compute.if_else(
                        is_ri,
                        "arn:aws:ec2:us-east-1:111111111111:ri/ri-1",
                        pa.scalar(None, pa.string()),
                    ),
                    "reservation_effective_cost": pa.compute.if_else(
                        is_ri, pa.array(amortised), pa.scalar(None, pa.float64())
                    ),
                    "savings_plan_savings_plan_a_r_n": pa.compute.if_else(
                        is_sp,
                        "arn:aws:savingsplans::111111111111:savingsplan/sp-1",
                        pa.scalar(None, pa.string()),
                    ),
                    "savings_plan_savings_plan_effective_cost": pa.compute.if_else(
                        is_sp, pa.array(amortised), pa.scalar(None, pa.float64())
                    ),
                    "resource_tags_user_project": pa.array(
                        [PROJECTS[p] for p in project], pa.string()
                    ),
                }
            )
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
                csv_writer = pcsv.CSVWriter(csv_path, table.schema)
            writer.write_table(table)
            csv_writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
            csv_writer.close()


def copy_once(csv_path: Path, header: list[str]) -> dict:
    """Seconds for a client streaming the CSV into a plain text table, and its billed sum."""
    import psycopg
    from django.db import connection

    dsn = connection.settings_dict
    conninfo = (
        f"host={dsn['HOST'] or '127.0.0.1'} port={dsn['PORT'] or 5432} "
        f"dbname={dsn['NAME']} user={dsn['USER']}"
        + (f" password={dsn['PASSWORD']}" if dsn.get("PASSWORD") else "")
    )
    columns = ", ".join(f'"{name}" text' for name in header)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_cur_text")
        conn.execute(f"CREATE TABLE bench_cur_text ({columns})")
        conn.execute("CHECKPOINT")
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            cursor.copy("COPY bench_cur_text FROM STDIN WITH (FORMAT csv, HEADER true)") as copy,
            csv_path.open("rb") as handle,
        ):
            while chunk := handle.read(1 << 20):
                copy.write(chunk)
        seconds = time.perf_counter() - started
        count, billed = conn.execute(
            "SELECT count(*), sum(line_item_unblended_cost::numeric) FROM bench_cur_text"
        ).fetchone()
        conn.execute("DROP TABLE bench_cur_text")
    return {"seconds": seconds, "count": count, "billed": billed}


def main() -> None:
    parser = argparse.ArgumentParser(description="CUR Parquet import against PostgreSQL's COPY.")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "costsite-bench"
    )
    parser.add_argument(
        "--command",
        action="store_true",
        help="Time `manage.py import_billing` into the database as it is, which must hold bills "
        "(issue 24), against floors (a) and (b) as bench/import_focus.py --command does.",
    )
    parser.add_argument(
        "--queued",
        action="store_true",
        help="CELERY_TASK_ALWAYS_EAGER=false: the import's process leaves the work it starts "
        "(the findings recompute) on the broker, emptied after each try, untimed.",
    )
    args = parser.parse_args()
    # The importing process inherits this environment.
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false" if args.queued else "true"

    import django

    django.setup()
    from decimal import Decimal

    from django.core.management import call_command
    from django.db import connection
    from import_focus import import_once

    if connection.vendor != "postgresql":
        raise SystemExit("The benchmark needs PostgreSQL: set DATABASE_URL.")
    call_command("migrate", verbosity=0)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    # v2: a resource's kind and tags are the same on all its lines (v1 drew them per line, and
    # 1M lines made 400,000 rows of the resource rollup where a real bill makes 60,000).
    path = args.data_dir / f"cur-v2-{args.rows}.parquet"
    csv_path = args.data_dir / f"cur-v2-{args.rows}.csv"
    if not path.exists() or not csv_path.exists():
        started = time.perf_counter()
        cur_parquet_write(path, csv_path, rows=args.rows)
        print(
            f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) and its CSV "
            f"({csv_path.stat().st_size / 1e6:,.0f} MB) in {time.perf_counter() - started:.0f} s"
        )
    header = csv_path.open().readline().strip().replace('"', "").split(",")
    if args.command:
        command_benchmark(args, path, csv_path, header)
        return
    copies, imports = [], []
    for attempt in range(args.repeat):
        copies.append(copy_once(csv_path, header))
        imports.append(import_once(path))
        if args.queued:
            from costsite.celery import app

            app.control.purge()  # nobody takes the work the import queued
        print(
            f"  try {attempt + 1}: COPY {copies[-1]['seconds']:.1f} s, import "
            f"{imports[-1]['seconds']:.1f} s "
            f"({imports[-1]['seconds'] / copies[-1]['seconds']:.2f}x), "
            f"peak {imports[-1]['peak_mb']:.0f} MB",
            flush=True,
        )
    last, copied = imports[-1], copies[-1]
    assert last["rows"] == copied["count"] == args.rows, (last["rows"], copied["count"])
    assert Decimal(last["billed_cost"]["USD"]) == copied["billed"], (
        last["billed_cost"],
        copied["billed"],
    )
    floor = statistics.median(c["seconds"] for c in copies)
    took = statistics.median(i["seconds"] for i in imports)
    peak = max(i["peak_mb"] for i in imports)
    print(f"  totals checked: {args.rows:,} rows, billed {copied['billed']}")
    print(
        f"\n{args.rows:,} CUR Parquet rows: COPY {floor:.1f} s ({args.rows / floor:,.0f} rows/s), "
        f"import {took:.1f} s ({args.rows / took:,.0f} rows/s), ratio {took / floor:.2f}x, "
        f"peak {peak:.0f} MB (medians of {args.repeat}; peak the highest); the findings "
        + ("recompute queued for a worker" if args.queued else "recompute run in the process")
    )


def command_benchmark(args, path: Path, csv_path: Path, header: list[str]) -> None:
    """`manage.py import_billing` of the CUR Parquet file as a user runs it, into the database as
    it is, against (a) COPY of its rows as text and (b) the binary COPY of the same lines, typed,
    into the line item table (bench/import_focus.py's floors), alternating; each try's delivery
    deleted afterwards (untimed)."""
    import import_focus
    from import_focus import command_database_ready, command_try, delivery_check

    assert import_focus.BENCH_ACCOUNT == BENCH_ACCOUNT  # its deliveries are the ones deleted
    command_database_ready()
    saved = args.data_dir / f"cur-lines-{args.rows}.bin"
    tries = []
    for attempt in range(args.repeat):
        copied = copy_once(csv_path, header)
        typed, imported = command_try(
            path,
            saved,
            queued=args.queued,
            month=JANUARY,  # the bill's month: an eager try recomputes it without the bill first
            # The amortised (effective) cost is the mapping's: checked the same everywhere.
            check=lambda delivery, c=copied: delivery_check(
                delivery, (c["count"], c["billed"], None)
            ),
        )
        text, took = copied["seconds"], imported["seconds"]
        tries.append((text, typed, imported))
        print(
            f"  try {attempt + 1}: (a) {text:5.1f} s, (b) {typed:5.1f} s, command {took:5.1f} s "
            f"= importing {imported['importing']:.1f} + the work it started "
            f"{imported['after']:.1f} + start and exit "
            f"{took - imported['importing'] - imported['after']:.1f}; {took / typed:.2f}x (b), "
            f"{took / text:.2f}x (a), peak {imported['peak_mb']:.0f} MB; totals checked "
            f"(billed {copied['billed']})",
            flush=True,
        )
    saved.unlink()
    to_typed = [i["seconds"] / b for _, b, i in tries]
    to_text = [i["seconds"] / a for a, _, i in tries]
    print(
        f"\n{args.rows:,} CUR Parquet rows through the command: (a) "
        f"{statistics.median(a for a, _, _ in tries):.1f} s, (b) "
        f"{statistics.median(b for _, b, _ in tries):.1f} s, command "
        f"{statistics.median(i['seconds'] for *_, i in tries):.1f} s; "
        f"{statistics.median(to_typed):.2f}x (b) median, {max(to_typed):.2f}x worst; "
        f"{statistics.median(to_text):.2f}x (a) median, {max(to_text):.2f}x worst; peak "
        f"{max(i['peak_mb'] for *_, i in tries):.0f} MB (the highest); the findings recompute "
        + ("queued for a worker" if args.queued else "run in the command's process")
    )


if __name__ == "__main__":
    main()
