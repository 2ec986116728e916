"""Benchmark: GPU metrics import against PostgreSQL's COPY of the same samples.

A week of 15-second samples for 64 GPUs (8 hosts of 8: 2,580,480 samples, eight metrics each),
written twice:
  - as nvidia-smi CSV logs with units (`--format=csv`), one per host, as `nvidia-smi -l 15` writes;
  - as Prometheus query_range JSON responses, one per metric per day (56 files), as a pull fetches
    them; each day's eight responses are imported as one unit, as a pull imports them.
Reported per format: seconds, samples per second, the peak memory (max RSS) of the process that
imports, and the ratio to the time PostgreSQL takes to COPY the same samples (one row per GPU and
moment, all eight metrics) into a plain table, measured in the same run, right before. Goal: within
2x of COPY, peak memory under 300 MB; issue 24 asks 1.5x of the Prometheus JSON.

What is timed is the import as a worker runs it (a pull's task, an upload's): the service, in a
process already started, as production runs it (DEBUG off), into an empty rollup, then the same
files again (which must add no sample). With --queued the findings recompute that each import's
commit starts is left on the broker for a worker, as compose runs it (the queue is emptied after
each run, untimed); without, Celery runs it in the importing process (the embedded default).
`--runs` repeats the whole (COPY and both formats), and the medians and worst ratios are printed.
The run fails on a wrong sample count or a second import that adds any.

Run from the repository root against a PostgreSQL server (it creates and drops its own database,
test_<name of DATABASE_URL's database>, so no data of yours is touched):

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/costsite python bench/gpu_import.py

The generated files are kept in bench/out/gpu/ and reused while their parameters are the same.
"""

import argparse
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

START = datetime(2026, 7, 6, tzinfo=UTC)
HOSTS_PER_FILE = 8
SMI_HEADER = (
    "timestamp, index, uuid, name, utilization.gpu [%], utilization.memory [%], "
    "memory.total [MiB], memory.used [MiB], memory.free [MiB], power.draw [W], "
    "temperature.gpu, clocks.current.sm [MHz]"
)
PROM_METRICS = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
]
MODEL = "NVIDIA H100 80GB HBM3"
TOTAL_MIB = 81559


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Data -------------------------------------------------------------------------------------------


def _gpu_values(gpus: int, steps: int, seed: int):
    """Eight metrics per GPU and step, as numpy arrays [gpu, step]: busy, idle and daily cycles."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    base = rng.choice([92.0, 30.0, 2.0, 60.0], size=gpus, p=[0.4, 0.2, 0.2, 0.2])
    daily = 30 * np.sin(2 * np.pi * t / 5760)  # a day is 5,760 steps of 15 s
    util = np.clip(base[:, None] + rng.normal(0, 6, (gpus, steps)), 0, 100)
    util[base == 60.0] = np.clip(util[base == 60.0] + daily, 0, 100)
    util = np.rint(util)
    used = np.rint(np.clip(util * 700 + rng.normal(2000, 300, (gpus, steps)), 0, TOTAL_MIB - 500))
    return {
        "util": util,
        "engine": np.round(util / 100 * 0.93, 6),
        "mem_util": np.rint(util * 0.4),
        "used": used,
        "free": TOTAL_MIB - used - 479,
        "power": np.round(70 + util * 6.2 + rng.normal(0, 4, (gpus, steps)), 2),
        "temp": np.rint(35 + util * 0.4),
        "sm_clock": np.where(util > 5, 1980, 345),
    }


def write_data(out: Path, *, gpus: int, days: int, step: int) -> dict:
    manifest_path = out / "manifest.json"
    params = {"gpus": gpus, "days": days, "step": step, "version": 2}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("params") == params:
            return manifest
    out.mkdir(parents=True, exist_ok=True)
    steps = days * 86400 // step
    values = _gpu_values(gpus, steps, seed=6)
    lists = {name: array.tolist() for name, array in values.items()}
    uuids = [f"GPU-{n:08x}-6b1e-4c0f-9d7a-{n * 7919:012x}" for n in range(gpus)]
    hosts = [f"gpu-node-{n // HOSTS_PER_FILE:02d}" for n in range(gpus)]
    start = int(START.timestamp())
    print(f"writing {gpus * steps:,} samples to {out} ...", flush=True)

    smi_files = []
    plain = out / "plain.csv"
    with plain.open("w") as copy_file:
        for first in range(0, gpus, HOSTS_PER_FILE):
            path = out / f"nvidia-smi-{hosts[first]}.csv"
            smi_files.append({"path": str(path), "host": hosts[first]})
            with path.open("w") as smi:
                smi.write(SMI_HEADER + "\n")
                for k in range(steps):
                    moment = START + timedelta(seconds=k * step)
                    stamp = moment.strftime("%Y/%m/%d %H:%M:%S")
                    iso = moment.strftime("%Y-%m-%d %H:%M:%S")
                    for g in range(first, min(first + HOSTS_PER_FILE, gpus)):
                        ms = (g * 37) % 1000
                        v = {name: rows[g][k] for name, rows in lists.items()}
                        smi.write(
                            f"{stamp}.{ms:03d}, {g - first}, {uuids[g]}, {MODEL}, "
                            f"{v['util']:.0f} %, {v['mem_util']:.0f} %, {TOTAL_MIB} MiB, "
                            f"{v['used']:.0f} MiB, {v['free']:.0f} MiB, {v['power']:.2f} W, "
                            f"{v['temp']:.0f}, {v['sm_clock']} MHz\n"
                        )
                        copy_file.write(
                            f"{uuids[g]},{hosts[g]},{iso}.{ms:03d}+00,{v['util']:.0f},"
                            f"{v['mem_util']:.0f},{TOTAL_MIB},{v['used']:.0f},{v['free']:.0f},"
                            f"{v['power']:.2f},{v['temp']:.0f},{v['sm_clock']}\n"
                        )

    prom_days = []
    per_day = 86400 // step
    columns = {
        "DCGM_FI_DEV_GPU_UTIL": ("util", "{:.0f}"),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("engine", "{:.6f}"),
        "DCGM_FI_DEV_FB_USED": ("used", "{:.0f}"),
        "DCGM_FI_DEV_FB_FREE": ("free", "{:.0f}"),
        "DCGM_FI_DEV_POWER_USAGE": ("power", "{:.6f}"),
        "DCGM_FI_DEV_GPU_TEMP": ("temp", "{:.0f}"),
        "DCGM_FI_DEV_SM_CLOCK": ("sm_clock", "{:.0f}"),
        "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util", "{:.0f}"),
    }
    for day in range(days):
        files = []
        for metric in PROM_METRICS:
            name, fmt = columns[metric]
            path = out / f"prometheus-{metric}-day{day + 1}.json"
            files.append(str(path))
            result = []
            for g in range(gpus):
                labels = {
                    "__name__": metric,
                    "DCGM_FI_DRIVER_VERSION": "580.105.08",
                    "Hostname": hosts[g],
                    "UUID": uuids[g],
                    "device": f"nvidia{g % HOSTS_PER_FILE}",
                    "gpu": str(g % HOSTS_PER_FILE),
                    "instance": f"10.0.{g // HOSTS_PER_FILE}.7:9400",
                    "job": "nvidia-dcgm-exporter",
                    "modelName": MODEL,
                    "pci_bus_id": f"00000000:{g % HOSTS_PER_FILE:02X}:00.0",
                }
                row = values[name][g, day * per_day : (day + 1) * per_day]
                points = ",".join(
                    f'[{start + (day * per_day + k) * step},"{fmt.format(value)}"]'
                    for k, value in enumerate(row.tolist())
                )
                result.append(f'{{"metric":{json.dumps(labels)},"values":[{points}]}}')
            path.write_text(
                '{"status":"success","data":{"resultType":"matrix","result":['
                + ",".join(result)
                + "]}}"
            )
        prom_days.append(files)
    manifest = {
        "params": params,
        "samples": gpus * steps,
        "smi": smi_files,
        "prometheus_days": prom_days,
        "plain": str(plain),
    }
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


# Measurements -----------------------------------------------------------------------------------


def copy_baseline(database_url: str, plain: str) -> float:
    """Seconds PostgreSQL takes to COPY the samples into a plain table (no index, no key)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_gpu_samples")
        conn.execute(
            "CREATE TABLE bench_gpu_samples (uuid text, host text, ts timestamptz, "
            "util real, memory_util real, memory_total real, memory_used real, "
            "memory_free real, power real, temperature real, sm_clock real)"
        )
        started = time.perf_counter()
        with (
            conn.cursor() as cursor,
            open(plain, "rb") as source,
            cursor.copy("COPY bench_gpu_samples FROM STDIN (FORMAT csv)") as copy,
        ):
            while block := source.read(1 << 20):
                copy.write(block)
        seconds = time.perf_counter() - started
        conn.execute("DROP TABLE bench_gpu_samples")
    return seconds


def run_import(kind: str, manifest: dict) -> dict:
    """In a fresh process (so that its peak memory is its own): import one format, twice."""
    import django

    django.setup()
    from apps.gpu import services
    from apps.gpu.models import Gpu, GpuHour

    GpuHour.objects.all().delete()
    Gpu.objects.all().delete()
    if kind == "nvidia-smi":
        units = [
            [
                services.MetricInput(
                    name=item["path"],
                    format="nvidia-smi",
                    open=lambda path=item["path"]: open(path, "rb"),  # noqa: SIM115
                    host=item["host"],
                    time_zone="UTC",
                )
            ]
            for item in manifest["smi"]
        ]
    else:
        units = [
            [
                services.MetricInput(
                    name=path,
                    format="prometheus-json",
                    open=lambda path=path: open(path, "rb"),  # noqa: SIM115
                )
                for path in day
            ]
            for day in manifest["prometheus_days"]
        ]
    results = {}
    for attempt in ("first", "again"):
        started = time.perf_counter()
        samples = 0
        for inputs in units:
            samples += services.gpu_metrics_load(inputs=inputs).samples
        results[attempt] = {"seconds": time.perf_counter() - started, "samples": samples}
    results["gpu_hours"] = GpuHour.objects.count()
    results["gpus"] = Gpu.objects.count()
    results["peak_mb"] = peak_mb()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--step", type=int, default=15)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "gpu"))
    parser.add_argument("--runs", type=int, default=3, help="repeat the whole (default 3)")
    parser.add_argument(
        "--queued",
        action="store_true",
        help="CELERY_TASK_ALWAYS_EAGER=false, as compose runs it: the findings recompute each "
        "import starts is left for a worker (needs the broker at CELERY_BROKER_URL).",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.out)

    if args.child:
        manifest = json.loads((out / "manifest.json").read_text())
        print(json.dumps(run_import(args.child, manifest)))
        return

    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("The benchmark needs PostgreSQL: set DATABASE_URL=postgresql://...")
    manifest = write_data(out, gpus=args.gpus, days=args.days, step=args.step)

    # A database of its own, migrated, dropped at the end: nothing of DATABASE_URL's is touched.
    connection.settings_dict.setdefault("TEST", {})["NAME"] = (
        f"{connection.settings_dict['NAME']}_gpubench"
    )
    name = connection.creation.create_test_db(
        verbosity=0, autoclobber=True, serialize=False, keepdb=False
    )
    settings_dict = connection.settings_dict
    bench_url = f"postgresql://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}/{name}"
    if settings_dict.get("PASSWORD"):
        bench_url = bench_url.replace("@", f":{settings_dict['PASSWORD']}@", 1)
    env = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        **os.environ,
        "DATABASE_URL": bench_url,
        "DJANGO_DEBUG": "false",
        "CELERY_TASK_ALWAYS_EAGER": "false" if args.queued else "true",
    }
    runs = []
    try:
        for _ in range(args.runs):
            report = {"copy_seconds": copy_baseline(bench_url, manifest["plain"]), "formats": {}}
            for kind in ("nvidia-smi", "prometheus-json"):
                child = subprocess.run(  # noqa: S603
                    [sys.executable, __file__, "--out", str(out), "--child", kind],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                report["formats"][kind] = json.loads(child.stdout.strip().splitlines()[-1])
                if args.queued:
                    from costsite.celery import app

                    app.control.purge()  # nobody takes the recomputes the imports queued
            runs.append(report)
    finally:
        connection.creation.destroy_test_db(name, verbosity=0)
    failures = report_runs(runs, manifest["samples"], args)
    if failures:
        sys.exit("\n".join(failures))


def report_runs(runs: list[dict], samples: int, args) -> list[str]:
    """Print each run and the medians and worst ratios; return what was wrong."""
    mode = "recompute queued for a worker" if args.queued else "recompute in the process (eager)"
    print(
        f"\n{samples:,} samples ({args.gpus} GPUs x {args.days} days at {args.step} s, "
        f"8 metrics each), PostgreSQL, {mode}"
    )
    print(
        f"{'run':>3} {'format':<16} {'COPY s':>7} {'seconds':>8} {'samples/s':>10} "
        f"{'x COPY':>7} {'peak MB':>8}  again"
    )
    failures = []
    for number, report in enumerate(runs, start=1):
        copy_seconds = report["copy_seconds"]
        for kind, result in report["formats"].items():
            first = result["first"]
            result["ratio"] = first["seconds"] / copy_seconds
            print(
                f"{number:>3} {kind:<16} {copy_seconds:7.2f} {first['seconds']:8.2f} "
                f"{samples / first['seconds']:10,.0f} {result['ratio']:7.2f} "
                f"{result['peak_mb']:8.0f}  {result['again']['seconds']:.2f} s, "
                f"{result['again']['samples']} new samples"
            )
            if first["samples"] != samples:
                failures.append(
                    f"run {number}, {kind}: {first['samples']:,} samples, not {samples:,}"
                )
            if result["again"]["samples"]:
                failures.append(
                    f"run {number}, {kind}: importing again added {result['again']['samples']:,}"
                )
    for kind in runs[0]["formats"]:
        ratios = [report["formats"][kind]["ratio"] for report in runs]
        seconds = [report["formats"][kind]["first"]["seconds"] for report in runs]
        peaks = [report["formats"][kind]["peak_mb"] for report in runs]
        print(
            f"{kind}: {statistics.median(ratios):.2f}x COPY median, {max(ratios):.2f}x worst "
            f"({statistics.median(seconds):.2f} s median; peak {max(peaks):.0f} MB) over "
            f"{len(runs)} run(s)"
        )
    copies = [report["copy_seconds"] for report in runs]
    print(f"COPY: {statistics.median(copies):.2f} s median ({min(copies):.2f}-{max(copies):.2f})")
    print(json.dumps(runs))
    for failure in failures:
        print(f"!! {failure}")
    return failures


if __name__ == "__main__":
    main()
