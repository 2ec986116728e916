"""Malformed import files, generated with Hypothesis, and the check every import of one must pass.

Shared by the property tests (a bounded profile in CI) and `bench/import_fuzz.py` (thousands).

Each importer starts from valid rows of its format (the fixtures' own) and breaks them one way:
- a value that no reading of the column can accept, in a column the import cannot do without
  (a number that is no number or is too large, an impossible date, a date out of all proportion,
  an unknown charge category, tags that are no JSON object);
- the file's structure: a row with a field missing or one too many, an unterminated quote, a NUL
  byte, UTF-16, old Mac line ends, a header without rows, a truncated gzip;
- or random text in a random column, which may or may not be valid.

The check (`outcome`): the run ends succeeded or failed, never with an internal error; a failure
names the file and, for a row's fault, the row and column; nothing of a failed run is stored (the
rows are counted before and after); a success stores every line it says it loaded.
"""

import csv
import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

BAD_NUMBERS = [
    "abc",
    "1e30",
    "9" * 30,
    "-" + "9" * 24,
    "NaN",
    "Infinity",
    "--1",
    "0x10",
    "1e",
    "$5",
    "1.2.3",
    "1,5",
    " ",
    "",
]
BAD_ISO_TIMES = [
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "2025-13-01T00:00:00Z",
    "2025-02-30T00:00:00Z",
    "2025-01-01T25:00:00Z",
    "yesterday",
    "",
    "1970-01-01T00:00:00Z",
    "2099-01-01T00:00:00Z",
]
BAD_GCP_TIMES = [
    "0001-01-01 00:00:00+00:00",
    "9999-12-31 23:59:59+00:00",
    "2025-13-01 00:00:00+00:00",
    "soon",
    "",
    "1970-01-01 00:00:00+00:00",
]
BAD_US_DATES = ["13/01/2025", "01/01/0001", "12/31/9999", "31/01/2025", "", "tomorrow", "1/1/1970"]
BAD_MONTHS = ["202513", "000101", "999912", "abc", "", "2025-01"]
BAD_JSON = ["{", "[1, 2]", '"text"', '{"a": ' + '"' + "x" * 2000 + '"}', "{'a': 1"]
BAD_ENUM = ["Usagee", "Discount", "", "Charge"]


@dataclass(frozen=True)
class Importer:
    """One format's valid rows, how to write them, and which columns must be valid."""

    name: str
    kind: str  # billing or metrics
    rows: Callable[[], list[dict]]
    write: Callable[[Path, list[dict]], Path]
    mandatory: dict[str, list[str]]  # column -> values no import may accept there
    suffix: str = ".csv"
    text: bool = True  # structural faults apply (CSV-like text)
    header: bool = True  # the first line is a header, not a row


def _csv_writer(encoding: str = "utf-8") -> Callable[[Path, list[dict]], Path]:
    def write(path: Path, rows: list[dict]) -> Path:
        names = list(dict.fromkeys(name for row in rows for name in row))
        with open(path, "w", newline="", encoding=encoding) as handle:
            writer = csv.DictWriter(handle, fieldnames=names)
            writer.writeheader()
            for row in rows:
                writer.writerow(
                    {
                        name: json.dumps(row[name])
                        if isinstance(row.get(name), dict)
                        else row.get(name, "")
                        for name in names
                    }
                )
        return path

    return write


def billing_importers() -> list[Importer]:
    from .billing.conftest import focus_line
    from .billing.formats.cur import athena_lines as cur_athena_lines
    from .billing.formats.cur import cur2_lines, cur_lines, write_parquet
    from .billing.formats.test_azure import ea_rows, mca_rows
    from .billing.formats.test_gcp import gcp_rows

    def focus_rows() -> list[dict]:
        return [
            focus_line(Tags='{"project": "vision"}'),
            focus_line(BilledCost="2.50", EffectiveCost="2.25", ResourceId="i-1"),
            focus_line(ChargeCategory="Tax", BilledCost="0.30", EffectiveCost="0.30"),
            focus_line(ChargeCategory="Credit", BilledCost="-1", EffectiveCost="-1"),
        ]

    def parquet_write(path: Path, rows: list[dict]) -> Path:
        return write_parquet(path, rows)

    return [
        Importer(
            "focus",
            "billing",
            focus_rows,
            _csv_writer(),
            {
                "BilledCost": BAD_NUMBERS,
                "EffectiveCost": BAD_NUMBERS,
                "ChargePeriodStart": BAD_ISO_TIMES,
                "ChargePeriodEnd": BAD_ISO_TIMES[:7],
                "BillingPeriodStart": BAD_ISO_TIMES,
                "ChargeCategory": BAD_ENUM,
                "Tags": BAD_JSON,
            },
        ),
        Importer(
            "aws-cur",
            "billing",
            cur_lines,
            _csv_writer(),
            {
                "lineItem/UnblendedCost": BAD_NUMBERS,
                "lineItem/UsageStartDate": BAD_ISO_TIMES[:-2],
                "bill/BillingPeriodStartDate": BAD_ISO_TIMES,
            },
        ),
        Importer(
            "aws-cur-parquet",
            "billing",
            lambda: cur_athena_lines(cur_lines()),
            parquet_write,
            {
                "line_item_usage_start_date": [
                    "0001-01-01T00:00:00+00:00",
                    "9999-12-31T00:00:00+00:00",
                ],
                "bill_billing_period_start_date": [
                    "1970-01-01T00:00:00+00:00",
                    "2099-01-01T00:00:00+00:00",
                ],
                "line_item_unblended_cost": ["1e30", "nan", "inf"],
            },
            suffix=".parquet",
            text=False,
        ),
        Importer(
            "aws-cur2",
            "billing",
            lambda: cur2_lines(cur_lines()),
            _csv_writer(),
            {
                "line_item_unblended_cost": BAD_NUMBERS,
                "line_item_usage_start_date": BAD_ISO_TIMES[:-2],
                "bill_billing_period_start_date": BAD_ISO_TIMES,
            },
        ),
        Importer(
            "gcp",
            "billing",
            gcp_rows,
            _csv_writer(),
            {
                "cost": BAD_NUMBERS,
                "usage_start_time": BAD_GCP_TIMES,
                "invoice.month": BAD_MONTHS,
            },
        ),
        Importer(
            "azure-ea",
            "billing",
            ea_rows,
            _csv_writer("utf-8-sig"),
            {
                "Cost": BAD_NUMBERS,
                "Date": BAD_US_DATES,
                "BillingPeriodStartDate": BAD_US_DATES,
            },
        ),
        Importer(
            "azure-mca",
            "billing",
            lambda: mca_rows(ea_rows()),
            _csv_writer("utf-8-sig"),
            {"costInBillingCurrency": BAD_NUMBERS, "date": BAD_US_DATES},
        ),
    ]


SMI_HEADER = "timestamp, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"
UUIDS = ["GPU-0a0a0a0a-1111-2222-3333-444444444444", "GPU-0b0b0b0b-1111-2222-3333-444444444444"]


def _smi_rows() -> list[dict]:
    return [
        {
            "timestamp": f"2026/07/14 10:{minute:02d}:00.000",
            "uuid": UUIDS[minute % 2],
            "name": "NVIDIA H100 80GB HBM3",
            "utilization.gpu [%]": f"{minute} %",
            "memory.used [MiB]": "1000 MiB",
            "memory.total [MiB]": "81559 MiB",
        }
        for minute in range(0, 40, 10)
    ]


def _smi_write(path: Path, rows: list[dict]) -> Path:
    names = list(rows[0]) if rows else SMI_HEADER.split(", ")
    lines = [", ".join(names), *(", ".join(str(row.get(n, "")) for n in names) for row in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _dcgm_rows() -> list[dict]:
    return [
        {
            "metric": metric,
            "labels": f'gpu="0",UUID="{UUIDS[0]}",modelName="NVIDIA L4",Hostname="node-a"',
            "value": value,
            "timestamp": "1784023200000",
        }
        for metric, value in (
            ("DCGM_FI_DEV_GPU_UTIL", "10"),
            ("DCGM_FI_DEV_FB_USED", "2048"),
            ("DCGM_FI_DEV_POWER_USAGE", "70.5"),
        )
    ]


def _dcgm_write(path: Path, rows: list[dict]) -> Path:
    text = "".join(
        f"{row['metric']}{{{row['labels']}}} {row['value']} {row['timestamp']}\n" for row in rows
    )
    path.write_text(text)
    return path


def _prometheus_rows() -> list[dict]:
    return [
        {
            "__name__": "DCGM_FI_DEV_GPU_UTIL",
            "UUID": UUIDS[0],
            "Hostname": "node-p",
            "time": str(1784023200 + 60 * step),
            "value": str(10 * step),
        }
        for step in range(4)
    ]


def _prometheus_write(path: Path, rows: list[dict]) -> Path:
    def stamp(text):
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            return text

    series = {}
    for row in rows:
        labels = {k: row[k] for k in ("__name__", "UUID", "Hostname") if row.get(k)}
        key = json.dumps(labels, sort_keys=True)
        series.setdefault(key, (labels, []))[1].append([stamp(row["time"]), row["value"]])
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": labels, "values": values} for labels, values in series.values()],
        },
    }
    path.write_text(json.dumps(body))
    return path


BAD_SMI_TIMES = ["0001/01/01 00:00:00.000", "9999/12/31 23:59:59.000", "2026-07-14T10:00:00", "x"]
BAD_EPOCHS_MS = ["-62135596800000", "253402300799000", "1e400", "abc"]
BAD_EPOCHS = ["-62135596800", "253402300799", "1e30", '"soon"', "null"]


def metrics_importers() -> list[Importer]:
    return [
        Importer(
            "nvidia-smi",
            "metrics",
            _smi_rows,
            _smi_write,
            {"timestamp": BAD_SMI_TIMES, "utilization.gpu [%]": ["abc %", "1,2"]},
        ),
        Importer(
            "dcgm",
            "metrics",
            _dcgm_rows,
            _dcgm_write,
            {"timestamp": BAD_EPOCHS_MS, "value": ["abc", "1..2", "--"]},
            suffix=".txt",
            header=False,
        ),
        Importer(
            "prometheus-json",
            "metrics",
            _prometheus_rows,
            _prometheus_write,
            {"time": BAD_EPOCHS, "value": ["abc", "1..2", ""]},
            suffix=".json",
            text=False,
        ),
    ]


# -- the cases ---------------------------------------------------------------------------------

STRUCTURAL = [
    "field-missing",
    "field-extra",
    "open-quote",
    "nul",
    "utf-16",
    "cr-line-ends",
    "header-only",
    "empty",
    "truncated-gzip",
]


@dataclass(frozen=True)
class Case:
    importer: str
    fault: str  # bad-value, structural fault name, or random-text
    must_fail: bool
    path: Path


@st.composite
def cases(draw, importer: Importer, folder: Path) -> Case:
    """One file of `importer`'s format, broken one way, written under `folder`."""
    rows = importer.rows()
    count = draw(st.integers(min_value=1, max_value=len(rows)))
    rows = [dict(row) for row in rows[:count]]
    index = draw(st.integers(min_value=0, max_value=count - 1))
    faults = ["bad-value", "random-text"] + (STRUCTURAL if importer.text else [])
    fault = draw(st.sampled_from(faults))
    path = folder / f"case{importer.suffix}"
    if fault == "bad-value":
        column = draw(st.sampled_from(sorted(importer.mandatory)))
        rows[index][column] = draw(st.sampled_from(importer.mandatory[column]))
        _write(importer, path, rows)
        return Case(importer.name, f"bad {column}", True, path)
    if fault == "random-text":
        column = draw(st.sampled_from(sorted(rows[index])))
        rows[index][column] = draw(st.text(max_size=40))
        _write(importer, path, rows)
        return Case(importer.name, fault, False, path)
    importer.write(path, rows)
    data = path.read_bytes()
    line_end = b"\r\n" if b"\r\n" in data else b"\n"
    lines = data.split(line_end)
    row = index + (1 if importer.header else 0)
    if fault == "field-missing":
        lines[row] = lines[row].rsplit(b",", 1)[0]
    elif fault == "field-extra":
        lines[row] = lines[row] + b",extra"
    elif fault == "open-quote":
        lines[row] = lines[row] + b',"never closed'
    elif fault == "nul":
        lines[row] = lines[row][:3] + b"\x00" + lines[row][3:]
    elif fault == "header-only":
        lines = lines[:1] + [b""]
    elif fault == "empty":
        lines = [b""]
    data = line_end.join(lines)
    if fault == "utf-16":
        data = data.decode("utf-8-sig").encode("utf-16")
    elif fault == "cr-line-ends":
        data = data.replace(b"\r\n", b"\r").replace(b"\n", b"\r")
    elif fault == "truncated-gzip":
        data = gzip.compress(data)
        data = data[: draw(st.integers(min_value=10, max_value=max(10, len(data) - 9)))]
        path = path.with_suffix(path.suffix + ".gz")
    path.write_bytes(data)
    # Metrics files are read line by line, not as CSV records: an extra field may be one the
    # format reads (dcgm's labels), a header alone is an empty log, and CR line ends are read
    # as line ends. Such faults are judged as random text.
    must_fail = importer.kind == "billing" or fault not in (
        "field-extra",
        "header-only",
        "cr-line-ends",
    )
    return Case(importer.name, fault, must_fail, path)


def _write(importer: Importer, path: Path, rows: list[dict]) -> None:
    if importer.name == "aws-cur-parquet":
        _write_parquet_text(path, rows)
    else:
        importer.write(path, rows)


def _write_parquet_text(path: Path, rows: list[dict]) -> None:
    """Parquet whose timestamps and numbers may be broken: typed where the value reads as its
    type, else the column is written as text (as some exporters do)."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from .billing.formats.cur import NUMBERS, TIMESTAMPS

    names = list(dict.fromkeys(name for row in rows for name in row))
    arrays = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            if name in TIMESTAMPS:
                arrays[name] = pa.array(
                    [datetime.fromisoformat(v) if v else None for v in values],
                    pa.timestamp("us", tz="UTC"),
                )
                continue
            if name in NUMBERS:
                arrays[name] = pa.array([float(v) if v else None for v in values], pa.float64())
                continue
        except (TypeError, ValueError, pa.ArrowInvalid):
            pass
        if name in ("resource_tags", "product"):
            arrays[name] = pa.array(
                [list((v or {}).items()) if isinstance(v, dict) else [] for v in values],
                pa.map_(pa.string(), pa.string()),
            )
        else:
            arrays[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    pq.write_table(pa.table(arrays), path)


# -- the check -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: str  # succeeded, failed or unchanged
    message: str
    clean: bool  # the run ended as the rules say
    why: str = ""


def billing_outcome(case: Case) -> Outcome:
    from apps.billing.models import CostLineItem, DailyCost, Delivery, ImportRun
    from apps.billing.services import import_run_create, import_run_execute

    tables = (CostLineItem, DailyCost, Delivery)
    before = _counts(tables)
    run = import_run_create(paths=[str(case.path)], requested_format=case.importer)
    run = import_run_execute(import_run=run)
    after = _counts(tables)
    if run.status == ImportRun.Status.FAILED:
        return _failure(case, run.error, before, after)
    if run.status == ImportRun.Status.SUCCEEDED:
        # A restatement replaces the lines of the same period: count the run's own.
        loaded = sum(
            CostLineItem.objects.of_delivery(delivery).count()
            for delivery in Delivery.objects.filter(import_run=run)
        )
        if loaded != run.line_items:
            return Outcome(run.status, "", False, f"stored {loaded} lines of {run.line_items}")
        return _success(case, run.status)
    if run.status == ImportRun.Status.UNCHANGED:  # the same file was loaded before
        return _success(case, run.status)
    return Outcome(run.status, run.error, False, f"ended {run.status}")


def metrics_outcome(case: Case) -> Outcome:
    from apps.gpu.models import Gpu, GpuHour, MetricImport
    from apps.gpu.services import metric_import_create, metric_import_execute

    before = _counts((Gpu, GpuHour))
    run = metric_import_create(path=str(case.path), requested_format=case.importer, host="node-x")
    run = metric_import_execute(metric_import=run)
    after = _counts((Gpu, GpuHour))
    if run.status == MetricImport.Status.FAILED:
        return _failure(case, run.error, before, after)
    if run.status in (MetricImport.Status.SUCCEEDED, MetricImport.Status.UNCHANGED):
        return _success(case, run.status)
    return Outcome(run.status, run.error, False, f"ended {run.status}")


def _counts(models: tuple) -> tuple[int, ...]:
    """The rows of each table, in one query."""
    from django.db import connection

    counts = ", ".join(f"(SELECT count(*) FROM {model._meta.db_table})" for model in models)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {counts}")
        return tuple(cursor.fetchone())


def _failure(case: Case, message: str, before: tuple, after: tuple) -> Outcome:
    if before != after:
        return Outcome("failed", message, False, f"partial import: {before} rows, then {after}")
    if "Internal error" in message or "Traceback" in message:
        return Outcome("failed", message, False, "crashed")
    if not (message.startswith(case.path.name + ":") or message.startswith(str(case.path) + ":")):
        return Outcome("failed", message, False, "the message does not name the file")
    # A billing row's fault names its column; a metrics file is read line by line (a dcgm
    # line has no columns), where the line (or series and point) is the place.
    billing = not case.importer.startswith(("nvidia-smi", "dcgm", "prometheus"))
    row_only = ", column " not in message and _names_a_row(message) and not _structural(message)
    if billing and row_only:
        return Outcome("failed", message, False, "names a row but not the column")
    return Outcome("failed", message, True)


def _success(case: Case, status: str) -> Outcome:
    if case.must_fail:
        return Outcome(status, "", False, f"a {case.fault} case was accepted")
    return Outcome(status, "", True)


def _names_a_row(message: str) -> bool:
    return " row " in message or ": line " in message


def _structural(message: str) -> bool:
    """Faults of a row as a whole, which no column is to blame for."""
    return any(
        words in message
        for words in (
            "fields where the header has",
            "unterminated quote",
            "values separated by commas",
            "is not a JSON object",
            "not Prometheus text format",
            "not UTF-8",
        )
    )


def importers() -> list[Importer]:
    return billing_importers() + metrics_importers()


def outcome(importer: Importer, case: Case) -> Outcome:
    return (billing_outcome if importer.kind == "billing" else metrics_outcome)(case)


def describe(case: Case) -> str:
    head = case.path.read_bytes()[:600]
    return f"{case.importer} {case.fault}: {head!r}"
