"""A serving stack's request log (CSV: one row a request) counted into hourly traffic.

Columns, by header name (any order, any case; others are ignored):
- `timestamp`: when the request arrived, ISO 8601 with a time zone (2025-03-01T10:15:00Z);
- `latency_ms`: how long it took (empty: not in the percentiles);
- `tokens_in`, `tokens_out`: whole numbers (empty: 0);
- `request_hash`: a hash of the request (empty: never a duplicate).

Per UTC hour: requests, duplicates (a request whose hash came earlier in the same hour: what a
cache holding an hour would have answered; counted within the hour so that an hour sent again
on its own gives the same figures), the tokens' sums (the means are sums ÷ requests) and the
latency percentiles p50, p95 and p99 by nearest rank (the value at rank ⌈p ÷ 100 × n⌉ of the
hour's sorted latencies: a latency that was observed, never an interpolation).
"""

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.core.exceptions import ValidationError

from .services import TrafficFigures

COLUMNS = ("timestamp", "latency_ms", "tokens_in", "tokens_out", "request_hash")
REQUIRED = ("timestamp",)
MAX_ERRORS = 20  # a broken file says its first errors, not ten thousand
MAX_TOKENS = 2**63 - 1  # TrafficHour's tokens (a PostgreSQL bigint)


@dataclass
class _Hour:
    requests: int = 0
    duplicates: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latencies: list[float] = field(default_factory=list)
    hashes: set[str] = field(default_factory=set)


def nearest_rank(values: list[float], percent: int) -> float | None:
    """The value at rank ⌈percent ÷ 100 × n⌉ of the sorted values (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


def _moment(text: str) -> datetime:
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("no time zone")
    try:
        return moment.astimezone(UTC)
    except OverflowError as error:  # 0001-01-01T00:30+01:00: before the first UTC year
        raise ValueError("out of range") from error


def request_log_hours(stream, *, name: str) -> list[TrafficFigures]:
    """The log's hours, in order. Raises ValidationError listing each bad cell as
    "NAME, row R, column C: ..." (rows counted as the file's lines, the header is row 1)."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    try:
        reader = csv.reader(text)
        header = next(reader, None)
        if header is None:
            raise ValidationError(f"{name}: the file is empty (it needs a header row).")
        columns = {title.strip().lower(): index for index, title in enumerate(header)}
        missing = [column for column in REQUIRED if column not in columns]
        if missing:
            raise ValidationError(
                f"{name}, row 1: no column {', '.join(missing)} (the header has "
                f"{', '.join(title.strip() for title in header) or 'nothing'})."
            )
        hours: dict[datetime, _Hour] = defaultdict(_Hour)
        errors: list[str] = []

        def cell(row: list[str], column: str) -> str:
            index = columns.get(column)
            return row[index].strip() if index is not None and index < len(row) else ""

        for number, row in enumerate(reader, start=2):
            if not any(value.strip() for value in row):
                continue  # a blank line
            if len(errors) >= MAX_ERRORS:
                break
            where = f"{name}, row {number}, column"
            stamp = cell(row, "timestamp")
            try:
                moment = _moment(stamp)
            except ValueError as error:
                errors.append(
                    f"{where} timestamp: “{stamp}” is not an ISO 8601 time with a time zone"
                    + (" (add Z or +00:00)" if str(error) == "no time zone" else "")
                    + "."
                )
                continue
            latency = cell(row, "latency_ms")
            figures = {}
            bad = False
            for column in ("tokens_in", "tokens_out"):
                value = cell(row, column)
                if not value:
                    figures[column] = 0
                # ASCII digits only: "²".isdigit() holds and int() refuses it.
                elif value.isascii() and value.isdigit() and int(value) <= MAX_TOKENS:
                    figures[column] = int(value)
                elif value.isascii() and value.isdigit():
                    errors.append(
                        f"{where} {column}: “{value}” is more tokens than a figure holds "
                        f"({MAX_TOKENS:,} at most)."
                    )
                    bad = True
                else:
                    errors.append(f"{where} {column}: “{value}” is not a whole number of tokens.")
                    bad = True
            latency_value = None
            if latency:
                try:
                    latency_value = float(latency)
                except ValueError:
                    latency_value = math.nan
                if not math.isfinite(latency_value) or latency_value < 0:
                    errors.append(f"{where} latency_ms: “{latency}” is not a duration in ms.")
                    bad = True
            if bad:
                continue
            hour = hours[moment.replace(minute=0, second=0, microsecond=0)]
            hour.requests += 1
            hour.tokens_in += figures["tokens_in"]
            hour.tokens_out += figures["tokens_out"]
            if latency_value is not None:
                hour.latencies.append(latency_value)
            digest = cell(row, "request_hash")
            if digest:
                if digest in hour.hashes:
                    hour.duplicates += 1
                else:
                    hour.hashes.add(digest)
    except UnicodeDecodeError as error:
        raise ValidationError(f"{name}: not UTF-8 text ({error.reason}).") from error
    except csv.Error as error:
        raise ValidationError(f"{name}, row {reader.line_num}: {error}.") from error
    finally:
        text.detach()
    for moment, hour in sorted(hours.items()):
        if len(errors) >= MAX_ERRORS:
            break
        for column in ("tokens_in", "tokens_out"):
            if getattr(hour, column) > MAX_TOKENS:
                errors.append(
                    f"{name}: the hour from {moment:%Y-%m-%d %H:%M} UTC adds up to more than "
                    f"{MAX_TOKENS:,} {column} (what a figure of traffic holds)."
                )
    if errors:
        raise ValidationError(errors)
    if not hours:
        raise ValidationError(f"{name}: no requests in the file.")
    return [
        TrafficFigures(
            hour=moment,
            requests=hour.requests,
            duplicate_requests=hour.duplicates,
            tokens_in=hour.tokens_in,
            tokens_out=hour.tokens_out,
            latency_p50_ms=nearest_rank(hour.latencies, 50),
            latency_p95_ms=nearest_rank(hour.latencies, 95),
            latency_p99_ms=nearest_rank(hour.latencies, 99),
        )
        for moment, hour in sorted(hours.items())
    ]
