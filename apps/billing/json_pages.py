"""Saved API responses: JSON pages (`curl … > file.json`) read as rows, streamed with ijson.

The hosted-API providers answer in pages, and a user saves them as they come (one page, or several
appended to one file). Four shapes are told apart by their first page:
- `buckets`: `{"data": [{"start_time"|"starting_at", …, "results": [ … ]}], "has_more", …}`
  (OpenAI Costs and Usage, Anthropic cost and usage reports): a row per result, with the
  bucket's own fields under `bucket.` (`bucket.start_time`);
- `records`: `{"data": [ {…}, … ]}` (OpenRouter activity, LiteLLM's paged spend logs): a row per
  element of `data`;
- `list`: a top-level array of objects (LiteLLM `/spend/logs`): a row per element;
- `single`: `{"data": {…}}` (OpenRouter's generation): a row per page.
A row's place is its JSON path (`data[2].results[0]`, with the page's number when a file holds
several), which is what an error names.
"""

import gzip
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import ijson

SHAPES = ("buckets", "records", "list", "single")
HEADER_RECORDS = 50  # the header is the union of the first records' fields


def _open(path: Path, gzipped: bool):
    return gzip.open(path, "rb") if gzipped else path.open("rb")


def _scalar(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f") if value == value.to_integral_value() else str(value)
    return str(value)


def flatten(record: dict, prefix: str = "") -> dict[str, str | None]:
    """Nested objects become dotted names (`amount.value`); lists stay JSON text."""
    out: dict[str, str | None] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            nested = flatten(value, f"{name}.")
            if nested:
                out.update(nested)
            else:
                out[name] = None
        elif isinstance(value, list):
            out[name] = json.dumps(value, default=str)
        else:
            out[name] = _scalar(value)
    return out


def sniff(path: Path, gzipped: bool) -> str | None:
    """The page shape of a JSON file, or None when it is not one of them (NDJSON, say)."""
    try:
        with _open(path, gzipped) as handle:
            events = ijson.parse(handle, multiple_values=True)
            _, event, _ = next(events)
            if event == "start_array":
                _, event, _ = next(events)
                return "list" if event == "start_map" else None
            if event != "start_map":
                return None
            depth = 1
            for _, event, value in events:
                if event in ("start_map", "start_array"):
                    depth += 1
                elif event in ("end_map", "end_array"):
                    depth -= 1
                    if depth == 0:
                        return None  # the first page ended without `data`
                if depth == 1 and event == "map_key" and value == "data":
                    _, event, _ = next(events)
                    if event == "start_map":
                        return "single"
                    if event != "start_array":
                        return None
                    _, event, _ = next(events)
                    if event != "start_map":
                        return "records" if event == "end_array" else None
                    # The first element's keys say buckets (with results) or records.
                    inner = 1
                    for _, event, value in events:
                        if event in ("start_map", "start_array"):
                            inner += 1
                        elif event in ("end_map", "end_array"):
                            inner -= 1
                            if inner == 0:
                                return "records"
                        elif inner == 1 and event == "map_key" and value == "results":
                            return "buckets"
                    return None
    except (ijson.JSONError, StopIteration, OSError, EOFError, UnicodeDecodeError):
        return None
    return None


def records(path: Path, gzipped: bool, shape: str) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Every row of the file, flattened, with its JSON path."""
    with _open(path, gzipped) as handle:
        if shape == "list":
            for index, item in enumerate(ijson.items(handle, "item", multiple_values=True)):
                yield f"[{index}]", _record(item, f"[{index}]")
            return
        pages = ijson.items(handle, "", multiple_values=True)
        for page_number, page in enumerate(pages, start=1):
            where = f"page {page_number}: " if page_number > 1 else ""
            if not isinstance(page, dict):
                raise ValueError(f"{where}the file holds a JSON value that is not a page object")
            data = page.get("data")
            if shape == "single":
                yield f"{where}data", _record(data, f"{where}data")
                continue
            if not isinstance(data, list):
                raise ValueError(f"{where}data is not a list")
            for index, item in enumerate(data):
                if shape == "records":
                    yield f"{where}data[{index}]", _record(item, f"{where}data[{index}]")
                    continue
                if not isinstance(item, dict) or not isinstance(item.get("results"), list):
                    raise ValueError(f"{where}data[{index}] is not a bucket with results")
                bucket = flatten(
                    {k: v for k, v in item.items() if k != "results" and not isinstance(v, list)},
                    "bucket.",
                )
                for inner, result in enumerate(item["results"]):
                    at = f"{where}data[{index}].results[{inner}]"
                    row = _record(result, at)
                    row.update(bucket)
                    yield at, row


def _record(item, at: str) -> dict[str, str | None]:
    if not isinstance(item, dict):
        raise ValueError(f"{at} is not a JSON object")
    return flatten(item)


def header(path: Path, gzipped: bool, shape: str) -> list[str]:
    """The fields of the first rows, in the order first seen."""
    names: dict[str, None] = {}
    for count, (_, row) in enumerate(records(path, gzipped, shape), start=1):
        names.update(dict.fromkeys(row))
        if count >= HEADER_RECORDS:
            break
    return list(names)
