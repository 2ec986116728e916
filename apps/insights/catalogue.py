"""The price catalogue's loader: reads the price files (CSV and JSON, the shape of the files in
`data/`), validates every row, and replaces each table's rows with those that passed, keeping
each row's source and date. A refused row is reported by file, row and column; a file-level
fault (a missing column, unreadable JSON) refuses the whole load, so nothing changes."""

import csv
import json
import re
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.db import transaction

from .models import GpuInstancePrice, GpuTypeMemory, ModelApiPrice, StorageEgressPrice

DATA_DIR = Path(__file__).resolve().parent / "data"
GPU_FILE = "gpu_instance_prices.csv"
MEMORY_FILE = "gpu_type_memory.csv"
MODEL_FILE = "model_api_prices.json"
STORAGE_FILE = "storage_egress_prices.csv"

GPU_COLUMNS = (
    "cloud",
    "instance_type",
    "accelerator_name",
    "accelerator_count",
    "vcpus",
    "memory_gib",
    "region",
    "price_per_hour",
    "spot_price_per_hour",
)
MEMORY_COLUMNS = ("gpu_type", "vendor", "memory_gb", "source_url", "as_of")
STORAGE_COLUMNS = (
    "cloud",
    "service",
    "item",
    "region",
    "volume_tier",
    "unit",
    "price_usd",
    "source_url",
    "source_kind",
    "notes",
)
# The GPU and storage files carry no date per row; SOURCES.md dates their collection.
COLLECTED_ON = date(2026, 11, 30)
SOURCES_DATE = re.compile(r"collected (\d{4}-\d{2}-\d{2})")


class CatalogueError(Exception):
    """A file-level fault: the load changes nothing."""


@dataclass
class Refusal:
    file: str
    row: int
    column: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}, row {self.row}, column {self.column}: {self.message}"


@dataclass
class LoadResult:
    loaded: dict[str, int] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"loaded": self.loaded, "refused": [str(refusal) for refusal in self.refused]}


class _Row:
    """One CSV row being validated: each failed check records a refusal naming the column."""

    def __init__(self, file: str, number: int, values: dict, refused: list[Refusal]) -> None:
        self.file, self.number, self.values, self.refused = file, number, values, refused
        self.ok = True

    def refuse(self, column: str, message: str) -> None:
        self.ok = False
        self.refused.append(Refusal(self.file, self.number, column, message))

    def text(self, column: str, *, required: bool = True) -> str:
        value = (self.values.get(column) or "").strip()
        if required and not value:
            self.refuse(column, "is empty")
        return value

    def amount(self, column: str, *, required: bool = False, positive: bool = False):
        raw = (self.values.get(column) or "").strip()
        if not raw:
            if required:
                self.refuse(column, "is empty")
            return None
        try:
            value = Decimal(raw)
        except InvalidOperation:
            self.refuse(column, f"{raw!r} is not a number")
            return None
        if not value.is_finite() or value < 0 or (positive and value == 0):
            self.refuse(column, f"{raw!r} must be {'over' if positive else 'at least'} 0")
            return None
        return value


def _csv_rows(path: Path, columns: tuple[str, ...]):
    if not path.exists():
        raise CatalogueError(f"{path.name}: file not found in {path.parent}")
    handle = path.open(newline="", encoding="utf-8")
    reader = csv.DictReader(handle)
    missing = [column for column in columns if column not in (reader.fieldnames or [])]
    if missing:
        handle.close()
        raise CatalogueError(f"{path.name}: missing column(s) {', '.join(missing)}")
    return handle, reader


def _sources_date(directory: Path) -> date:
    sources = directory / "SOURCES.md"
    if sources.exists():
        match = SOURCES_DATE.search(sources.read_text(encoding="utf-8"))
        if match:
            return date.fromisoformat(match.group(1))
    return COLLECTED_ON


def read_gpu_prices(path: Path, *, as_of: date, refused: list[Refusal]) -> list[GpuInstancePrice]:
    handle, reader = _csv_rows(path, GPU_COLUMNS)
    prices, seen = [], {}
    with handle:
        for number, values in enumerate(reader, start=2):
            row = _Row(path.name, number, values, refused)
            if None in values:
                row.refuse("(end)", f"{len(values[None])} value(s) beyond the header's columns")
                continue
            cloud = row.text("cloud")
            instance_type = row.text("instance_type", required=False)
            gpu_type = row.text("accelerator_name")
            count = row.amount("accelerator_count", required=True, positive=True)
            vcpus = row.amount("vcpus")
            memory = row.amount("memory_gib")
            region = row.text("region")
            on_demand = row.amount("price_per_hour")
            spot = row.amount("spot_price_per_hour")
            if row.ok and on_demand is None and spot is None:
                row.refuse("price_per_hour", "neither an on-demand nor a spot price")
            if row.ok and on_demand is not None and spot is not None and spot > on_demand:
                # The source has these (pricing-API quirks, or a spot price rounded up): the
                # on-demand price stands, the spot price is refused and left out.
                refused.append(
                    Refusal(
                        path.name,
                        number,
                        "spot_price_per_hour",
                        f"spot {spot} is above on-demand {on_demand}: spot price left out",
                    )
                )
                spot = None
            key = (cloud, instance_type, gpu_type, count, region)
            if row.ok and key in seen:
                row.refuse("region", f"repeats row {seen[key]} (same instance, GPUs and region)")
            if not row.ok:
                continue
            seen[key] = number
            prices.append(
                GpuInstancePrice(
                    provider=cloud,
                    instance_type=instance_type,
                    gpu_type=gpu_type,
                    gpu_count=count,
                    vcpus=vcpus,
                    memory_gib=memory,
                    region=region,
                    currency="USD",
                    on_demand_per_hour=on_demand,
                    spot_per_hour=spot,
                    source=f"{path.name} row {number}",
                    as_of=as_of,
                )
            )
    return prices


def read_gpu_memory(path: Path, *, refused: list[Refusal]) -> list[GpuTypeMemory]:
    handle, reader = _csv_rows(path, MEMORY_COLUMNS)
    rows, seen = [], {}
    with handle:
        for number, values in enumerate(reader, start=2):
            row = _Row(path.name, number, values, refused)
            gpu_type = row.text("gpu_type")
            vendor = row.text("vendor")
            memory = row.amount("memory_gb", required=True, positive=True)
            source = row.text("source_url")
            raw_date = row.text("as_of")
            as_of = None
            if raw_date:
                try:
                    as_of = date.fromisoformat(raw_date)
                except ValueError:
                    row.refuse("as_of", f"{raw_date!r} is not a date (YYYY-MM-DD)")
            if row.ok and gpu_type in seen:
                row.refuse("gpu_type", f"repeats row {seen[gpu_type]}")
            if not row.ok:
                continue
            seen[gpu_type] = number
            rows.append(
                GpuTypeMemory(
                    gpu_type=gpu_type, vendor=vendor, memory_gb=memory, source=source, as_of=as_of
                )
            )
    return rows


def read_storage_prices(
    path: Path, *, as_of: date, refused: list[Refusal]
) -> list[StorageEgressPrice]:
    handle, reader = _csv_rows(path, STORAGE_COLUMNS)
    rows, seen = [], {}
    with handle:
        for number, values in enumerate(reader, start=2):
            row = _Row(path.name, number, values, refused)
            fields = {
                "provider": row.text("cloud"),
                "service": row.text("service"),
                "item": row.text("item"),
                "region": row.text("region"),
                "volume_tier": row.text("volume_tier", required=False),
            }
            unit = row.text("unit")
            price = row.amount("price_usd", required=True)
            source = row.text("source_url")
            key = tuple(fields.values())
            if row.ok and key in seen:
                row.refuse("volume_tier", f"repeats row {seen[key]}")
            if not row.ok:
                continue
            seen[key] = number
            rows.append(
                StorageEgressPrice(
                    **fields,
                    unit=unit,
                    price=price,
                    currency="USD",
                    source=source[:1000],
                    source_kind=row.text("source_kind", required=False),
                    notes=row.text("notes", required=False),
                    as_of=as_of,
                )
            )
    return rows


def _token_price(entry: dict, key: str, name: str, refused: list[Refusal], file: str):
    value = entry.get(key)
    if value is None:
        return None
    try:
        price = Decimal(str(value))
    except InvalidOperation:
        price = None
    if price is None or not price.is_finite() or price < 0:
        refused.append(Refusal(file, 0, key, f"{name}: {value!r} is not a price"))
        return None
    return price


def read_model_prices(path: Path, *, as_of: date, refused: list[Refusal]) -> list[ModelApiPrice]:
    """Entries with a price per input or output token (per-image or per-second modes are left
    out: nothing here prices them yet). The JSON has no rows, so a refusal names the model."""
    if not path.exists():
        raise CatalogueError(f"{path.name}: file not found in {path.parent}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CatalogueError(
            f"{path.name}: not JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(data, dict):
        raise CatalogueError(f"{path.name}: expected an object keyed by model name")
    rows = []
    for name, entry in data.items():
        if name == "sample_spec" or not isinstance(entry, dict):
            continue
        before = len(refused)
        prices = {
            "input_per_token": _token_price(
                entry, "input_cost_per_token", name, refused, path.name
            ),
            "output_per_token": _token_price(
                entry, "output_cost_per_token", name, refused, path.name
            ),
            "cached_input_per_token": _token_price(
                entry, "cache_read_input_token_cost", name, refused, path.name
            ),
            "batch_input_per_token": _token_price(
                entry, "input_cost_per_token_batches", name, refused, path.name
            ),
            "batch_output_per_token": _token_price(
                entry, "output_cost_per_token_batches", name, refused, path.name
            ),
        }
        if len(refused) > before:
            for refusal in refused[before:]:
                refusal.message = f"model {refusal.message}"
            continue
        if prices["input_per_token"] is None and prices["output_per_token"] is None:
            continue
        rows.append(
            ModelApiPrice(
                name=name[:300],
                provider=str(entry.get("litellm_provider", ""))[:100],
                mode=str(entry.get("mode", ""))[:50],
                currency="USD",
                source=f"{path.name} {name}"[:1000],
                as_of=as_of,
                **prices,
            )
        )
    return rows


@transaction.atomic
def catalogue_load(*, directory: Path = DATA_DIR) -> LoadResult:
    """Replace the catalogue with the files in `directory` (all four, or nothing changes)."""
    directory = Path(directory)
    result = LoadResult()
    as_of = _sources_date(directory)
    tables = [
        (
            GpuInstancePrice,
            read_gpu_prices(directory / GPU_FILE, as_of=as_of, refused=result.refused),
        ),
        (GpuTypeMemory, read_gpu_memory(directory / MEMORY_FILE, refused=result.refused)),
        (
            ModelApiPrice,
            read_model_prices(directory / MODEL_FILE, as_of=as_of, refused=result.refused),
        ),
        (
            StorageEgressPrice,
            read_storage_prices(directory / STORAGE_FILE, as_of=as_of, refused=result.refused),
        ),
    ]
    for model, rows in tables:
        model.objects.all().delete()
        model.objects.bulk_create(rows, batch_size=1000)
        result.loaded[model._meta.model_name] = len(rows)
    return result
