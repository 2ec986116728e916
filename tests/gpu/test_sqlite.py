"""The demo's database: the command imports, skips what it has, and refuses alike on SQLite."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOG = """\
timestamp, uuid, utilization.gpu [%], memory.used [MiB]
2026/07/14 10:00:00.000, GPU-lite, 0 %, 100 MiB
2026/07/14 10:20:00.000, GPU-lite, 60 %, 300 MiB
2026/07/14 10:40:00.000, GPU-lite, 90 %, 500 MiB
"""
# Overlaps the log at 10:40; adds 11:00.
MORE = """\
timestamp, uuid, utilization.gpu [%], memory.used [MiB]
2026/07/14 10:40:00.000, GPU-lite, 90 %, 500 MiB
2026/07/14 11:00:00.000, GPU-lite, 30 %, 200 MiB
"""


def manage(*args: str, database: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_imports_overlaps_and_refuses_alike_on_sqlite(tmp_path, sqlite_database):
    database = sqlite_database
    log, more = tmp_path / "log.csv", tmp_path / "more.csv"
    log.write_text(LOG)
    more.write_text(MORE)
    bad = tmp_path / "bad.csv"
    bad.write_text(LOG.replace("60 %", "6O %"))
    options = ["--host", "lite-box", "--timezone", "UTC", "--json"]

    first = manage("import_gpu_metrics", str(log), str(more), *options, database=database)
    again = manage("import_gpu_metrics", str(log), *options, database=database)
    refused = manage("import_gpu_metrics", str(bad), *options, database=database)

    assert first.returncode == 0, first.stderr
    assert [json.loads(line)["samples"] for line in first.stdout.splitlines()] == [3, 1]
    assert json.loads(again.stdout)["status"] == "unchanged"
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"] == (
        f"{bad}: line 3, column 'utilization.gpu [%]': '6O %' is not a number."
    )
    hours = manage(
        "shell",
        "--verbosity",
        "0",
        "-c",
        "from apps.gpu.models import GpuHour; "
        "print([(h.hour.hour, h.samples, h.util_mean, h.memory_used_mib) "
        "for h in GpuHour.objects.order_by('hour')])",
        database=database,
    )
    assert hours.stdout.strip() == "[(10, 3, 50.0, 300.0), (11, 1, 30.0, 200.0)]"
