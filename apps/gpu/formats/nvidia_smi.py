"""nvidia-smi --query-gpu=... --format=csv[,nounits] logs.

The separator is ", "; fields are never quoted; the header names carry units in brackets unless
`nounits` was given, and so do the values (`81559 MiB`, `100 %`); `[N/A]`, `[Not Supported]` and
the like mean no value; columns come in any order, with any extra ones; with `-l` the header is
printed once and blocks of rows follow. Timestamps (`2026/07/14 08:12:53.353`) are the host's local
time without an offset: `context.time_zone` says which zone.

Read a few megabytes at a time, each piece parsed by pyarrow's CSV reader and converted with
pyarrow.compute, so a log of millions of rows takes seconds and a bounded amount of memory.
"""

import io
import re
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from . import (
    MEMORY_FREE,
    MEMORY_RESERVED,
    MEMORY_TOTAL,
    MEMORY_USED,
    POWER,
    UTIL_DEVICE,
    GpuInfo,
    GpuMetricsError,
    MetricBatch,
    ParseContext,
    clean_values,
    first_outside,
    outside_window,
    reading_window,
)

# Field (as --query-gpu names it, or its alias) -> our name.
FIELDS = {
    "timestamp": "timestamp",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "hostname": "hostname",
    "utilization.gpu": UTIL_DEVICE,
    "memory.used": MEMORY_USED,
    "memory.free": MEMORY_FREE,
    "memory.reserved": MEMORY_RESERVED,
    "memory.total": MEMORY_TOTAL,
    "power.draw": POWER,
    "power.draw.average": "power_average",
    "power.draw.instant": "power_instant",
}
METRIC_COLUMNS = (UTIL_DEVICE, MEMORY_USED, MEMORY_FREE, MEMORY_RESERVED, MEMORY_TOTAL, POWER)
# Units nvidia-smi appends to values; trimmed from the right of a value.
UNIT_CHARACTERS = " %MiBWHzus"
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
CHUNK_BYTES = 4 << 20


def _field(header_name: str) -> str:
    """`memory.used [MiB]` -> `memory.used`."""
    return header_name.split("[", 1)[0].strip().lower()


def _read_header(stream, name: str) -> list[str]:
    raw = stream.readline()
    try:
        line = raw.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise GpuMetricsError(f"{name}: line 1: not UTF-8 text.") from None
    header = [part.strip() for part in line.split(",")]
    fields = [_field(part) for part in header]
    if not any(field in FIELDS for field in fields):
        raise GpuMetricsError(
            f"{name}: line 1: no nvidia-smi header (expected names such as timestamp, uuid, "
            "utilization.gpu [%]); was it written with --format=csv,noheader?"
        )
    if "uuid" not in fields and "gpu_uuid" not in fields and "index" not in fields:
        raise GpuMetricsError(
            f"{name}: line 1: no uuid or index column, so the rows cannot be told apart; "
            "query uuid (--query-gpu=timestamp,uuid,...)."
        )
    return header


def _missing(values: pa.Array) -> pa.Array:
    """True where a trimmed value means "no value": empty, N/A or any [bracketed] token."""
    return pc.or_(
        pc.or_(pc.equal(values, ""), pc.starts_with(values, "[")), pc.equal(values, "N/A")
    )


def _rows(values: pa.Array, take: pa.Array | None) -> pa.Array:
    return values if take is None else pc.take(values, take)


class _Columns:
    """The columns of one batch, trimmed, with the file's line number of each row."""

    def __init__(self, batch: pa.RecordBatch, first_line: int, names: dict[str, str]):
        self.batch = batch
        self.first_line = first_line
        self.names = names  # our name -> header name as written
        self._trimmed: dict[str, pa.Array] = {}

    def has(self, field: str) -> bool:
        return field in self.names

    def text(self, field: str) -> pa.Array:
        if field not in self._trimmed:
            self._trimmed[field] = pc.utf8_trim_whitespace(self.batch.column(self.names[field]))
        return self._trimmed[field]

    def line(self, row: int) -> int:
        return self.first_line + row


def parse(stream, *, context: ParseContext) -> Iterator[MetricBatch]:
    name = context.name
    header = _read_header(stream, name)
    # Unique column names for pyarrow; ours map each field we use to the first column naming it.
    column_names = [f"{position}:{label}" for position, label in enumerate(header)]
    names: dict[str, str] = {}
    for column, label in zip(column_names, header, strict=True):
        ours = FIELDS.get(_field(label))
        if ours and ours not in names:
            names[ours] = column
    if not any(metric in names for metric in METRIC_COLUMNS) and not any(
        power in names for power in ("power_average", "power_instant")
    ):
        raise GpuMetricsError(
            f"{name}: line 1: none of utilization.gpu, memory.used, memory.total, power.draw "
            "is queried, so there is nothing to roll up."
        )
    if "timestamp" not in names and context.taken_at is None:
        raise GpuMetricsError(
            f"{name}: line 1: no timestamp column; say when the rows were taken (--at)."
        )

    read_options = pacsv.ReadOptions(
        column_names=column_names, block_size=1 << 20, use_threads=False
    )
    # Blank lines are kept as rows (of empty strings) so that row numbers stay line numbers.
    parse_options = pacsv.ParseOptions(quote_char=False, ignore_empty_lines=False)
    convert_options = pacsv.ConvertOptions(
        column_types={column: pa.string() for column in column_names},
        include_columns=list(dict.fromkeys(names.values())),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    first_line = 2
    gpu_ids: dict[tuple, int] = {}
    for chunk in _chunks(stream):
        try:
            table = pacsv.read_csv(
                io.BytesIO(chunk),
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options,
            )
        except pa.ArrowInvalid as exc:
            raise _shape_error(chunk, first_line, len(column_names), name, exc) from None
        batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
        if batch is not None:
            yield from _batch_metrics(_Columns(batch, first_line, names), context, gpu_ids)
        first_line += chunk.count(b"\n")


def _chunks(stream) -> Iterator[bytes]:
    """The rest of the stream in pieces of about CHUNK_BYTES, each ending at the end of a line.

    pyarrow's own streaming reader reads far ahead of its consumer (over a hundred megabytes on a
    big log); cutting the input ourselves keeps memory at a few chunks. Fields are never quoted, so
    a newline always ends a row.
    """
    rest = b""
    while True:
        data = stream.read(CHUNK_BYTES)
        if not data:
            if rest:
                yield rest if rest.endswith(b"\n") else rest + b"\n"
            return
        data = rest + data
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        rest = data[cut:]
        yield data[:cut]


def _shape_error(
    chunk: bytes, first_line: int, expected: int, name: str, exc: Exception
) -> GpuMetricsError:
    """Find the line pyarrow could not split into the header's columns."""
    for number, line in enumerate(chunk.split(b"\n"), start=first_line):
        found = line.count(b",") + 1
        if line.strip() and found != expected:
            return GpuMetricsError(
                f"{name}: line {number}: expected {expected} values separated by commas, "
                f"found {found}."
            )
    return GpuMetricsError(f"{name}: line {first_line}: not CSV ({exc}).")


def _batch_metrics(
    columns: _Columns, context: ParseContext, gpu_ids: dict[tuple, int]
) -> Iterator[MetricBatch]:
    batch = columns.batch
    if batch.num_rows == 0:
        return
    # Blank lines, and the header again (logs appended to with a fresh header), are not readings.
    key_field = "uuid" if columns.has("uuid") else "index"
    keys = columns.text(key_field)
    keep = pc.and_(pc.not_equal(keys, ""), pc.invert(pc.equal(pc.utf8_lower(keys), key_field)))
    if columns.has("timestamp"):
        stamps = columns.text("timestamp")
        keep = pc.and_(keep, pc.not_equal(pc.utf8_lower(stamps), "timestamp"))
    rows = np.flatnonzero(keep.to_numpy(zero_copy_only=False))
    if len(rows) == 0:
        return
    take = None if len(rows) == batch.num_rows else pa.array(rows)

    ts = _timestamps(columns, take, rows, context)
    gpu = _gpus(columns, take, context, gpu_ids)
    power_field = next(
        (field for field in (POWER, "power_average", "power_instant") if columns.has(field)), None
    )
    values = {}
    for metric in METRIC_COLUMNS:
        field = power_field if metric == POWER else metric
        if field is not None and columns.has(field):
            values[metric] = _numbers(columns, field, take, rows, context.name)
    yield MetricBatch(gpu, ts, values)


def _timestamps(columns: _Columns, take: pa.Array | None, rows: np.ndarray, context) -> np.ndarray:
    window = reading_window()
    if not columns.has("timestamp"):
        taken = context.taken_at.timestamp()
        if not window[0] <= taken <= window[1]:
            raise GpuMetricsError(
                f"{context.name}: when the rows were taken (--at): {outside_window(taken, window)}."
            )
        return np.full(len(rows), taken, dtype=np.float64)
    text = _rows(columns.text("timestamp"), take)
    # `2026/07/14 08:12:53.353`: the seconds with strptime, the milliseconds added after.
    whole = pc.strptime(
        pc.utf8_slice_codeunits(text, 0, 19),
        format="%Y/%m/%d %H:%M:%S",
        unit="ms",
        error_is_null=True,
    )
    fraction = pc.utf8_slice_codeunits(text, 19, 23)
    fraction_ok = pc.or_(pc.equal(fraction, ""), pc.match_substring_regex(fraction, r"^\.\d{1,3}$"))
    broken = pc.or_(pc.is_null(whole), pc.invert(fraction_ok))
    if pc.any(broken).as_py():
        position = pc.index(broken, True).as_py()
        raise GpuMetricsError(
            f"{context.name}: line {columns.line(int(rows[position]))}, column "
            f"{_header(columns, 'timestamp')!r}: {text[position].as_py()!r} is not a time "
            "like 2026/07/14 08:12:53.353."
        )
    try:
        local = pc.assume_timezone(
            whole, timezone=context.time_zone, ambiguous="earliest", nonexistent="earliest"
        )
    except pa.ArrowInvalid:
        raise GpuMetricsError(f"{context.name}: unknown time zone {context.time_zone!r}.") from None
    millis = pc.cast(local, pa.int64()).to_numpy()
    digits = pc.utf8_rpad(pc.utf8_slice_codeunits(fraction, 1, 4), width=3, padding="0")
    extra = pc.cast(pc.if_else(pc.equal(fraction, ""), "0", digits), pa.int64()).to_numpy()
    seconds = (millis + extra) / 1000.0
    position = first_outside(seconds, window)
    if position is not None:
        raise GpuMetricsError(
            f"{context.name}: line {columns.line(int(rows[position]))}, column "
            f"{_header(columns, 'timestamp')!r}: {text[position].as_py()!r}: "
            f"{outside_window(float(seconds[position]), window)}."
        )
    return seconds


def _gpus(
    columns: _Columns, take: pa.Array | None, context, gpu_ids: dict[tuple, int]
) -> np.ndarray:
    """GPU ids per row: one lookup per distinct GPU in the batch, then a vectorised take."""
    fields = [field for field in ("uuid", "index", "name", "hostname") if columns.has(field)]
    texts = {field: _rows(columns.text(field), take) for field in fields}
    key_field = "uuid" if "uuid" in texts else "index"
    encoded = pc.dictionary_encode(texts[key_field])
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    distinct = encoded.dictionary.to_pylist()
    first_rows = np.unique(codes, return_index=True)[1]
    ids = np.empty(len(distinct), dtype=np.int64)
    for code, row in zip(range(len(distinct)), first_rows, strict=True):
        values = {field: texts[field][int(row)].as_py() for field in fields}
        host = values.get("hostname", "")
        if not host or host.startswith("[") or host.upper() == "N/A":
            host = context.host
        index_text = values.get("index", "")
        index = int(index_text) if index_text.isdigit() else None
        uuid = values.get("uuid") or f"{host}/gpu{index_text}"
        key = (uuid, host, index, values.get("name", ""))
        if key not in gpu_ids:
            if not host and "uuid" not in values:
                raise GpuMetricsError(
                    f"{context.name}: rows have no uuid and no hostname; say which host the log "
                    "is from (--host)."
                )
            gpu_ids[key] = context.gpu_id(
                GpuInfo(uuid=uuid, host=host, index=index, model_name=values.get("name", ""))
            )
        ids[code] = gpu_ids[key]
    return ids[codes]


def _numbers(
    columns: _Columns, field: str, take: pa.Array | None, rows: np.ndarray, name: str
) -> np.ndarray:
    written = _rows(columns.text(field), take)
    text = pc.utf8_rtrim(written, UNIT_CHARACTERS)  # `81559 MiB` -> `81559`
    text = pc.if_else(_missing(text), pa.scalar(None, pa.string()), text)
    try:
        values = pc.cast(text, pa.float64())
    except pa.ArrowInvalid:
        for position, value in enumerate(text.to_pylist()):
            if value is not None and not NUMBER.match(value):
                raise GpuMetricsError(
                    f"{name}: line {columns.line(int(rows[position]))}, column "
                    f"{_header(columns, field)!r}: {written[position].as_py()!r} is not a number."
                ) from None
        raise
    return clean_values(values.to_numpy(zero_copy_only=False))


def _header(columns: _Columns, field: str) -> str:
    return columns.names[field].split(":", 1)[1]
