"""From FOCUS-named text columns to typed, checked line columns, one batch at a time.

Real exports are messy, so this accepts what a real export holds and rejects only what cannot be
understood:
- null is a real null, the literal NULL/null/Null, an empty string or only whitespace;
- enumerations compare without case, spaces or hyphens (`Usage-based`, `usagebased`), then take
  the spec's spelling; an unknown ServiceCategory is kept as written (newer versions add some);
- timestamps are UTC, with `T` or a space, with or without `Z` or an offset, or a bare date;
- decimals may use exponents (`35.2E-7`); more than 15 places are rounded half to even;
- Tags and SkuPriceDetails must be JSON objects; tag keys lose stray surrounding spaces.

Work is done per column with pyarrow; per *distinct* value where Python must look (enums, JSON).
When a batch fails a cast, the first bad element is found and named: file, row, column, value and
what was expected.
"""

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import BillingRowError
from .focus_spec import COLUMNS, OPEN_ENUMS, Column
from .model_api import API_REQUESTS, API_TOKENS, ModelApiColumns
from .models import CostKind, CostLineItem

if TYPE_CHECKING:  # formats import this module: no import of theirs at run time
    from .formats.base import ColumnMap

DEC = pa.decimal128(38, 15)
TS = pa.timestamp("us", tz="UTC")
DAY_US = 86_400_000_000  # a day in microseconds: a UTC timestamp's day is a division


NULL_SPELLINGS = ("", "NULL", "null", "Null")


@cache
def _null_tokens() -> pa.Array:
    """The spellings of null, made when first needed: pyarrow's array() of a Python list imports
    pandas (to ask whether it is a pandas object), about 0.4 s of CPU that every process paid at
    startup for this one constant."""
    return pa.array(NULL_SPELLINGS, pa.string())


NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
QUANTUM = Decimal("1e-15")
LIMIT = Decimal("1e23")  # 38 digits with 15 after the point
TOO_LARGE = (
    "is too large for the column (it holds numbers of up to 23 digits before the point and 15 "
    "after: below 10^23 in size)"
)
# Texts Arrow's decimal cast would wrap around instead of refusing: 24 or more digits before the
# point, or an exponent of 10 or more. They take the careful path.
OVERFLOWING = r"^\s*[+-]?0*[1-9]\d{23}|[eE]\+?0*[1-9]\d"
OVERFLOW_LENGTH = 24  # the first alternative's digits: no shorter text matches it
WIDE = Context(prec=80)
# Tags: real providers allow keys of up to 512 characters (Azure; AWS 128, GCP 63) and values of
# up to 256 (AWS and Azure; GCP 63). Four times that is allowed for values; past it a value is no
# label but a payload, and is refused.
TAG_KEY_LIMIT = 512
TAG_VALUE_LIMIT = 1024
# The plausible window for a line's dates, around its own billing period:
# - a billing period starts no earlier than 2000-01-01 (before any cloud bill) and no later than
#   62 days from now (this month's or next month's bill), lasts more than nothing and at most 92
#   days (a quarter; providers bill by the month);
# - a charge ends no earlier than it starts;
# - a charge starts no earlier than 731 days (two years) before its billing period (corrections
#   fix earlier periods) and no later than 3 days after its end (billing time zones: a GCP invoice
#   month runs on Pacific time), and ends no later than 1,127 days (a three-year commitment and a
#   month) after the period's end (a purchase covers the commitment's term);
# - a usage charge that is not a correction (ChargeClass = Correction) starts inside its billing
#   period, give or take the same 3 days.
EARLIEST_PERIOD = datetime(2000, 1, 1, tzinfo=UTC)
PERIOD_AHEAD = timedelta(days=62)
LONGEST_PERIOD = timedelta(days=92)
CORRECTION_REACH = timedelta(days=731)
ZONE_MARGIN = timedelta(days=3)
LONGEST_TERM = timedelta(days=1127)
# A usage line below this (in its billing currency) is refused: a refund that large comes as a
# Credit line or a correction. Credits, adjustments and corrections have no bound.
USAGE_COST_FLOOR = Decimal(-100_000)
DATETIME_EXAMPLE = "a date and time such as 2025-01-31T00:00:00Z"
CACHE_LIMIT = 200_000
# A decimal column's source text, kept beside the number when it converted exactly: the database
# parses it as well as our own rendering, and rendering decimals is the dearest part of the CSV.
TEXT_SUFFIX = "__text"
# A format that makes several lines of one source row (GCP's credits) says which row each line
# came from under this key; rows are then numbered by it.
SOURCE_INDEX = "_source_index"
# How many source rows a line holds: present where a format's per-request rows were rolled up.
SOURCE_ROWS = "_source_rows"
# A per-request row's measures, summed when its day's requests become one line: every decimal
# column of a line is an amount or a quantity (no unit price is kept), and the model API counts.
PER_REQUEST_SUMS = (
    *(column.name for column in COLUMNS if column.kind == "decimal"),
    API_TOKENS,
    API_REQUESTS,
)
MAX_LENGTHS = {
    f.column: f.max_length
    for f in CostLineItem._meta.concrete_fields
    if f.get_internal_type() == "CharField"
}

# Accelerated instance families (shared/reference/billing-formats.md §2.1, §3, §4).
AWS_GPU_FAMILIES = frozenset(
    {
        "p2",
        "p3",
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "g3",
        "g4dn",
        "g4ad",
        "g5",
        "g5g",
        "g6",
        "g6e",
        "gr6",
        "trn1",
        "trn1n",
        "trn2",
        "inf1",
        "inf2",
        "dl1",
    }
)
GCP_GPU_PREFIXES = ("a2-", "a3-", "a4-", "g2-")
AZURE_GPU = re.compile(r"^(standard_)?n[cdv]\d", re.IGNORECASE)
INSTANCE_IN_USAGE_TYPE = re.compile(r"^(ml\.)?[a-z][a-z0-9-]*\.[a-z0-9]+$")
HOUR_UNITS = ("hour", "hours", "hrs", "hr", "h", "1 hour")


def instance_is_gpu(instance_type: str) -> bool:
    """Whether an instance type (AWS, SageMaker, GCP or Azure spelling) carries accelerators."""
    name = instance_type.strip().lower()
    if name.startswith("ml."):
        name = name[3:]
    if name.startswith(GCP_GPU_PREFIXES) or AZURE_GPU.match(name):
        return True
    return name.split(".", 1)[0] in AWS_GPU_FAMILIES


def instance_from_usage_type(usage_type: str) -> str | None:
    """`BoxUsage:p4d.24xlarge`, `USE2-SpotUsage:g5.xlarge`, `Notebk:ml.t3.medium` → the type."""
    candidate = usage_type.rsplit(":", 1)[-1].strip()
    return candidate if INSTANCE_IN_USAGE_TYPE.match(candidate) else None


def clean_strings(array: pa.Array, *, spelled_nulls: bool = True) -> pa.Array:
    """Text with every null spelling made a real null.

    The CSV reader already turns empty fields and NULL into nulls (`spelled_nulls=False`);
    whitespace-only values, and Parquet's strings, are looked at here.
    """
    if not pa.types.is_string(array.type):
        array = pc.cast(array, pa.string())
    if not _may_be_blank(array, spelled_nulls):
        return array
    blank = pc.utf8_is_space(array)
    if spelled_nulls:
        blank = pc.or_kleene(blank, pc.is_in(array, value_set=_null_tokens()))
    if not pc.any(blank).as_py():  # nulls are skipped
        return array
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.offset:
        # pyarrow 22's if_else writes a slice of strings with offsets out of bounds: copy it.
        array = pa.concat_arrays([array])
    return pc.if_else(pc.fill_null(blank, False), pa.scalar(None, pa.string()), array)


# First bytes of a value that may be blank (whitespace, ASCII or not) or a spelling of null.
_BLANK_FIRST = np.zeros(256, bool)
_BLANK_FIRST[: ord(" ") + 1] = True
_BLANK_FIRST[0x80:] = True  # a multi-byte character: perhaps a Unicode space
_NULL_FIRST = np.zeros(256, bool)
_NULL_FIRST[[ord(spelling[0]) for spelling in NULL_SPELLINGS if spelling]] = True
_NULL_LONGEST = max(len(spelling.encode()) for spelling in NULL_SPELLINGS)


def _may_be_blank(array: pa.Array, spelled_nulls: bool) -> bool:
    """Whether any value could be empty, whitespace or a spelling of null, from the first byte
    and the length of each value on the array's buffers: a column of ordinary values (nearly
    every column) is then left alone without a text kernel run on every value."""
    if isinstance(array, pa.ChunkedArray):
        return any(_may_be_blank(chunk, spelled_nulls) for chunk in array.chunks)
    if array.null_count == len(array):
        return False
    validity, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, len(array) + 1, array.offset * 4)
    lengths = np.diff(offsets)
    if data_buffer is None or not data_buffer.size:
        first = np.zeros(len(array), np.uint8)
    else:
        data = np.frombuffer(data_buffer, np.uint8)
        first = data[np.minimum(offsets[:-1], len(data) - 1)]
    suspect = (lengths == 0) | _BLANK_FIRST[first]
    if spelled_nulls:
        suspect |= (lengths <= _NULL_LONGEST) & _NULL_FIRST[first]
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        suspect &= bits[array.offset : array.offset + len(array)].view(bool)
    return bool(suspect.any())


def _text_bytes(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """A text array's value offsets and the bytes its values span (for a slice, only its own
    values'), or None when it has no values or no bytes."""
    if len(chunk) == 0 or chunk.null_count == len(chunk):
        return None
    _, offsets_buffer, data = chunk.buffers()
    width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
    size = np.dtype(width).itemsize
    offsets = np.frombuffer(offsets_buffer, width, len(chunk) + 1, chunk.offset * size)
    if data is None or not data.size:
        return offsets, np.zeros(0, np.uint8)
    return offsets, np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]]


def _chunks(array: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def _may_hold_nul(array: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a zero byte is in the bytes of the text's values: one pass of memory, forty times
    quicker than a substring search of every value (a null's slot may span bytes, so a zero
    found says only "look closer")."""
    for chunk in _chunks(array):
        spanned = _text_bytes(chunk)
        if spanned is not None and np.count_nonzero(spanned[1]) != spanned[1].size:
            return True
    return False


def _may_overflow(array: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any text could match OVERFLOWING, from the buffers: it takes 24 characters or
    more, or an exponent (an e or E byte). Ordinary costs have neither, and are then not
    searched by the regular expression."""
    for chunk in _chunks(array):
        spanned = _text_bytes(chunk)
        if spanned is None:
            continue
        offsets, raw = spanned
        if int(np.diff(offsets).max()) >= OVERFLOW_LENGTH:
            return True
        if np.count_nonzero((raw | 0x20) == ord("e")):  # e or E
            return True
    return False


def _enum_key(value: str) -> str:
    return re.sub(r"[^a-z0-9]", "", value.lower())


class FocusNormaliser:
    """Checks and types the FOCUS columns of one file's batches; remembers distinct values."""

    def __init__(
        self,
        *,
        label: str,
        columns: "ColumnMap",
        spelled_nulls: bool = True,
        per_request: bool = False,
    ):
        self.label = label
        self.columns = columns
        self.spelled_nulls = spelled_nulls
        self.per_request = per_request
        self._enums = {
            column.name: {_enum_key(value): value for value in column.values}
            for column in COLUMNS
            if column.kind == "enum"
        }
        self._json: dict[str, dict[str, str | None]] = {"Tags": {}, "SkuPriceDetails": {}}
        self._sku: dict[str, tuple[str | None, int | None]] = {}
        self._usage_types: dict[str, str | None] = {}
        self._gpu_types: dict[str, bool] = {}
        self._source_index: list[int] | None = None
        self._model_api = ModelApiColumns()

    def _clean(self, array: pa.Array) -> pa.Array:
        return clean_strings(array, spelled_nulls=self.spelled_nulls)

    # -- errors ----------------------------------------------------------------------------

    def _source_name(self, focus_name: str) -> str:
        return self.columns.focus.get(focus_name, focus_name)

    def _fail(
        self, column: str, index: int, first_row: int, value, expected: str, *, problem: str = ""
    ):
        if self._source_index is not None:
            index = self._source_index[index]
        return BillingRowError(
            self.label,
            first_row + index,
            self._source_name(column),
            value,
            expected,
            problem=problem,
        )

    # -- columns ---------------------------------------------------------------------------

    def normalise(
        self, arrays: dict[str, pa.Array], extras: dict[str, pa.Array], *, first_row: int
    ) -> pa.Table:
        """The typed line columns of one batch, in FOCUS's meaning, with the source row."""
        arrays = dict(arrays)
        source_index = arrays.pop(SOURCE_INDEX, None)
        self._source_index = None if source_index is None else source_index.to_pylist()
        length = len(next(iter(arrays.values())))
        rows = (
            pa.array(range(first_row, first_row + length), pa.int64())
            if source_index is None
            else pc.add(source_index, pa.scalar(first_row, pa.int64()))
        )
        out: dict[str, pa.Array] = {"source_row": rows}
        if self.per_request:
            arrays, extras, rows, counts = self._per_day(arrays, extras, rows, first_row)
            self._source_index = pc.subtract(rows, pa.scalar(first_row, pa.int64())).to_pylist()
            length = len(rows)
            out = {"source_row": rows, SOURCE_ROWS: counts}
        for column in COLUMNS:
            array = arrays.get(column.name)
            if column.field is None:
                continue
            if array is None:
                out[column.field] = pa.nulls(length, _arrow_type(column))
                continue
            if column.kind != "decimal" and column.kind != "datetime":
                self._refuse_nul(column.name, array, first_row)
            typed = self._typed(column, array, first_row)
            if isinstance(typed, tuple):
                typed, text = typed
                out[column.field + TEXT_SUFFIX] = text
            self._refuse_null(column, typed, first_row)
            limit = MAX_LENGTHS.get(column.field)
            # Bytes bound characters from above: count characters only when bytes exceed.
            if (
                limit
                and len(typed)
                and (pc.max(pc.binary_length(typed)).as_py() or 0) > limit
                and (pc.max(pc.utf8_length(typed)).as_py() or 0) > limit
            ):
                index = pc.index(pc.greater(pc.utf8_length(typed), limit), True).as_py()
                raise self._fail(
                    column.name,
                    index,
                    first_row,
                    typed[index].as_py(),
                    f"text of at most {limit} characters",
                )
            out[column.field] = typed
        instance_type, gpu_count = self._sku_details(
            arrays.get("SkuPriceDetails"), first_row, length
        )
        usage_type = next(
            (array for name, array in extras.items() if name.strip().lower() == "x_usagetype"),
            None,
        )
        if usage_type is not None:
            instance_type = pc.coalesce(instance_type, self._usage_type_instances(usage_type))
        out["instance_type"] = instance_type
        out["gpu_count"] = gpu_count
        out["cost_kind"] = self._cost_kind(out["service_category"], instance_type, gpu_count)
        # Model API spend (hosted APIs, and the clouds' model services): model, tokens, kind.
        out.update(self._model_api.columns(arrays, extras, out, length, self._clean))
        for name, array in extras.items():
            self._refuse_nul(name, array, first_row)
        out["extra"] = self._extra_json(extras, length)
        self._check_lines(out, first_row, cost_floor=not self.per_request)
        return pa.table(out)

    def _per_day(
        self,
        arrays: dict[str, pa.Array],
        extras: dict[str, pa.Array],
        rows: pa.Array,
        first_row: int,
    ) -> tuple[dict[str, pa.Array], dict[str, pa.Array], pa.Array, pa.Array]:
        """A gateway's per-request rows as one line per UTC day and all else they share (key,
        team, model, provider, tags...): money, quantities, tokens and requests summed, the
        first start and the last end, numbered by the group's first row.

        The measures and times are typed and checked here, row by row, so a bad one is named by
        its own row; every other column is the same in the whole group, so checking it on the
        group (numbered by the group's first row, groups in the order of their first rows) names
        the first row that holds the bad value.
        """
        focus = {column.name: column for column in COLUMNS}
        summed: dict[str, pa.Array] = {}
        typed: dict[int, pa.Array] = {}  # BilledCost and EffectiveCost are often one column
        for name in PER_REQUEST_SUMS:
            if name in arrays:
                array = arrays[name]
                if name in focus:
                    if id(array) not in typed:
                        number = self._typed(focus[name], array, first_row)
                        typed[id(array)] = number[0] if isinstance(number, tuple) else number
                    array = typed[id(array)]
                    self._refuse_null(focus[name], array, first_row)  # a sum would skip it
                summed[name] = array
        times = {}
        for name in (
            "ChargePeriodStart",
            "ChargePeriodEnd",
            "BillingPeriodStart",
            "BillingPeriodEnd",
        ):
            if name in arrays:
                times[name] = self._datetime(focus[name], arrays[name], first_row)
                self._refuse_null(focus[name], times[name], first_row)
        start = times["ChargePeriodStart"]
        end = times.get("ChargePeriodEnd")
        # A whole line's checks, on each row: a group's span or sum could hide the row at fault.
        length = len(start)
        self._check_lines(
            {
                "billing_period_start": times.get("BillingPeriodStart", pa.nulls(length, TS)),
                "billing_period_end": times.get("BillingPeriodEnd", pa.nulls(length, TS)),
                "charge_period_start": start,
                "charge_period_end": start if end is None else end,
                **{
                    column.field: (
                        self._enum(column, arrays[column.name], first_row)
                        if column.name in arrays
                        else pa.nulls(length, pa.string())
                    )
                    for column in (focus["ChargeCategory"], focus["ChargeClass"])
                },
                "billed_cost": summed.get("BilledCost", pa.nulls(length, DEC)),
                "effective_cost": summed.get("EffectiveCost", pa.nulls(length, DEC)),
            },
            first_row,
        )
        keys = {
            **{f"a:{name}": array for name, array in arrays.items() if name not in summed},
            **{f"x:{name}": array for name, array in extras.items()},
        }
        keys.pop("a:ChargePeriodStart")
        keys.pop("a:ChargePeriodEnd", None)
        # A column with one value in the whole batch (the account, the currency, the service)
        # groups nothing: it is set again on the groups, and hashing fewer keys is quicker.
        constant = {name: array[0] for name, array in keys.items() if _constant(array)}
        keys = {name: array for name, array in keys.items() if name not in constant}
        table = pa.table(
            {
                **keys,
                "_day": pc.divide(pc.cast(start, pa.int64()), pa.scalar(DAY_US, pa.int64())),
                "_start": start,
                **({"_end": end} if end is not None else {}),
                "_row": rows,
                **{f"s:{name}": array for name, array in summed.items()},
            }
        )
        grouped = (
            table.group_by([*keys, "_day"], use_threads=False)
            .aggregate(
                [
                    *((f"s:{name}", "sum") for name in summed),
                    ("_start", "min"),
                    *([("_end", "max")] if end is not None else []),
                    ("_row", "min"),
                    ("_row", "count"),
                ]
            )
            .sort_by("_row_min")
        )
        size = grouped.num_rows
        for name, value in constant.items():
            grouped = grouped.append_column(name, pa.repeat(value, size))
        keys.update(constant)
        out = {name[2:]: grouped[name].combine_chunks() for name in keys if name[0] == "a"}
        for name in summed:
            out[name] = grouped[f"s:{name}_sum"].combine_chunks()
            if pa.types.is_decimal(summed[name].type):
                out[name] = pc.cast(out[name], summed[name].type)
        out["ChargePeriodStart"] = grouped["_start_min"].combine_chunks()
        if end is not None:
            out["ChargePeriodEnd"] = grouped["_end_max"].combine_chunks()
        grouped_extras = {
            name[2:]: grouped[name].combine_chunks() for name in keys if name[0] == "x"
        }
        counts = grouped["_row_count"].combine_chunks()
        return out, grouped_extras, grouped["_row_min"].combine_chunks(), counts

    def _typed(self, column: Column, array: pa.Array, first_row: int) -> pa.Array:
        if column.kind == "decimal":
            return self._decimal(column, array, first_row)
        if column.kind == "datetime":
            return self._datetime(column, array, first_row)
        if column.kind == "enum":
            return self._enum(column, array, first_row)
        if column.kind == "json":
            return self._json_object(column.name, array, first_row)
        return self._clean(array)

    def _refuse_null(self, column: Column, array: pa.Array, first_row: int) -> None:
        if column.not_null and array.null_count:
            index = pc.index(pc.is_null(array), True).as_py()
            raise self._fail(column.name, index, first_row, None, _expected(column))

    def _refuse_nul(self, name: str, array: pa.Array, first_row: int) -> None:
        """A NUL byte is binary data: no database text holds it."""
        if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            return
        if not _may_hold_nul(array):
            return
        found = pc.match_substring(array, "\x00")
        if pc.any(found).as_py():
            index = pc.index(pc.fill_null(found, False), True).as_py()
            value = array[index].as_py().replace("\x00", "\\x00")
            raise self._fail(
                name, index, first_row, value, "text", problem="holds a NUL byte (binary data)"
            )

    def _enum(self, column: Column, array: pa.Array, first_row: int) -> pa.Array:
        array = self._clean(array)
        encoded = pc.dictionary_encode(array)
        known = self._enums[column.name]
        spelled = []
        for value in encoded.dictionary.to_pylist():
            canonical = known.get(_enum_key(value))
            if canonical is None:
                if column.name not in OPEN_ENUMS:
                    index = pc.index(array, value).as_py()
                    raise self._fail(column.name, index, first_row, value, _expected(column))
                canonical = value.strip()
            spelled.append(canonical)
        return pc.take(pa.array(spelled, pa.string()), encoded.indices)

    def _decimal(self, column: Column, array: pa.Array, first_row: int):
        """The numbers, and with them their text when that converted exactly."""
        kind = array.type
        if pa.types.is_decimal(kind):
            try:
                return pc.cast(array, DEC)
            except pa.ArrowInvalid:
                return pc.cast(pc.round(array, ndigits=15, round_mode="half_to_even"), DEC)
        if pa.types.is_integer(kind):
            return pc.cast(array, DEC)
        if pa.types.is_floating(kind):
            # A float's shortest text is the number the exporter meant.
            array = pc.cast(array, pa.string())
        array = self._clean(array)
        if _may_overflow(array) and pc.any(pc.match_substring_regex(array, OVERFLOWING)).as_py():
            return self._decimal_slowly(column, array, first_row)
        try:
            return pc.cast(array, DEC), array
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return self._decimal_slowly(column, array, first_row)

    def _decimal_slowly(self, column: Column, array: pa.Array, first_row: int) -> pa.Array:
        """Round what has too many places; name the first value that is no number at all."""
        values = []
        for index, value in enumerate(array.to_pylist()):
            if value is None:
                values.append(None)
                continue
            text = value.strip()
            if not NUMBER.fullmatch(text):
                raise self._fail(column.name, index, first_row, value, "a decimal number")
            number = Decimal(text)
            if number.copy_abs() >= LIMIT:
                raise self._fail(
                    column.name, index, first_row, value, "a decimal number", problem=TOO_LARGE
                )
            values.append(number.quantize(QUANTUM, rounding=ROUND_HALF_EVEN, context=WIDE))
        return pa.array(values, DEC)

    def _datetime(self, column: Column, array: pa.Array, first_row: int) -> pa.Array:
        kind = array.type
        if pa.types.is_timestamp(kind):
            if kind.tz is None:
                return pc.cast(pc.cast(array, pa.timestamp("us")), TS)
            return pc.cast(array, TS)
        if pa.types.is_date(kind):
            return pc.cast(pc.cast(array, pa.timestamp("us")), TS)
        array = self._clean(array)
        try:
            return pc.cast(array, TS)  # the spec's form: 2025-01-31T00:00:00Z
        except pa.ArrowInvalid:
            pass
        try:
            return pc.cast(pc.cast(array, pa.timestamp("us")), TS)  # no zone: UTC
        except pa.ArrowInvalid:
            pass
        mended = _zoned(array)
        try:
            return pc.cast(mended, TS)
        except pa.ArrowInvalid:
            pass
        for index, value in enumerate(array.to_pylist()):
            if value is None:
                continue
            try:
                pc.cast(_zoned(pa.array([value], pa.string())), TS)
            except pa.ArrowInvalid:
                raise self._fail(column.name, index, first_row, value, DATETIME_EXAMPLE) from None
        raise AssertionError("a batch failed to cast but none of its values did")

    def _json_object(self, name: str, array: pa.Array, first_row: int) -> pa.Array:
        """JSON text of an object per row (keys stripped), null where the source is null."""
        if pa.types.is_map(array.type) or pa.types.is_struct(array.type):
            # Parquet may hold tags as a map; rare enough to go through Python.
            array = pa.array(
                [None if value is None else json.dumps(dict(value)) for value in array.to_pylist()],
                pa.string(),
            )
        array = self._clean(array)
        encoded = pc.dictionary_encode(array)
        cache = self._json[name]
        if len(cache) > CACHE_LIMIT:
            cache.clear()
        normalised = []
        for value in encoded.dictionary.to_pylist():
            if value not in cache:
                cache[value] = self._parse_object(name, value, array, first_row)
            normalised.append(cache[value])
        return pc.take(pa.array(normalised, pa.string()), encoded.indices)

    def _parse_object(self, name: str, value: str, array: pa.Array, first_row: int) -> str:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            index = pc.index(array, value).as_py()
            raise self._fail(
                name,
                index,
                first_row,
                value,
                f"a JSON object ({exc.msg} at character {exc.pos + 1})",
            ) from None
        if not isinstance(parsed, dict):
            index = pc.index(array, value).as_py()
            raise self._fail(name, index, first_row, value, "a JSON object of keys and values")
        if _holds_nul(parsed):  # a \u0000 escape
            index = pc.index(array, value).as_py()
            raise self._fail(
                name, index, first_row, value, "", problem="holds a NUL character (\\u0000)"
            )
        if name == "Tags":
            self._check_tags(parsed, value, array, first_row)
        return json.dumps(
            {str(key).strip(): item for key, item in parsed.items()}, separators=(",", ":")
        )

    def _check_tags(self, tags: dict, value: str, array: pa.Array, first_row: int) -> None:
        for key, item in tags.items():
            text = item if isinstance(item, str) else json.dumps(item)
            if len(str(key)) > TAG_KEY_LIMIT:
                problem = (
                    f"has a tag key of {len(str(key)):,} characters (at most {TAG_KEY_LIMIT} "
                    "are taken)"
                )
            elif len(text) > TAG_VALUE_LIMIT:
                problem = (
                    f"has a value of {len(text):,} characters for tag {_short(key)} (at most "
                    f"{TAG_VALUE_LIMIT:,} are taken)"
                )
            else:
                continue
            index = pc.index(array, value).as_py()
            raise self._fail("Tags", index, first_row, value, "tags", problem=problem)

    # -- the line as a whole -----------------------------------------------------------------

    def _check_lines(
        self, out: dict[str, pa.Array], first_row: int, *, cost_floor: bool = True
    ) -> None:
        """Refuse what no real bill holds (the window above): dates out of all proportion to
        the billing period, charges that end before they start, huge negative usage."""
        period_start = out["billing_period_start"]
        period_end = out["billing_period_end"]
        start = out["charge_period_start"]
        end = out["charge_period_end"]
        now = datetime.now(tz=UTC)

        def scalar(moment: datetime) -> pa.Scalar:
            return pa.scalar(moment, TS)

        def shift(array: pa.Array, delta: timedelta) -> pa.Array:
            # Arrow's add checks nothing: clamp, so that year 1 minus two years stays year 1.
            return pc.add(array, pa.scalar(delta, pa.duration("us")))

        def refuse(
            broken: pa.Array, column: str, values: pa.Array, problem: str, *, money=False
        ) -> None:
            broken = pc.fill_null(broken, False)
            if not pc.any(broken).as_py():
                return
            index = pc.index(broken, True).as_py()
            value = values[index].as_py()
            shown = str(value) if money else _moment(value)
            raise self._fail(column, index, first_row, shown, "", problem=problem)

        refuse(
            pc.or_(
                pc.less(period_start, scalar(EARLIEST_PERIOD)),
                pc.greater(period_start, scalar(now + PERIOD_AHEAD)),
            ),
            "BillingPeriodStart",
            period_start,
            "is outside the plausible window for a billing period's start (from 2000-01-01 to "
            f"{(now + PERIOD_AHEAD):%Y-%m-%d}, 62 days from now)",
        )
        # The period start is now within bounds: shifting it by the margins cannot overflow.
        refuse(
            pc.less_equal(period_end, period_start),
            "BillingPeriodEnd",
            period_end,
            "is not after the billing period's start",
        )
        refuse(
            pc.greater(period_end, shift(period_start, LONGEST_PERIOD)),
            "BillingPeriodEnd",
            period_end,
            "makes the billing period longer than 92 days",
        )
        refuse(
            pc.less(end, start),
            "ChargePeriodEnd",
            end,
            "is before the charge's start (ChargePeriodStart): the charge ends before it starts",
        )
        refuse(
            pc.or_(
                pc.less(start, shift(period_start, -CORRECTION_REACH)),
                pc.greater_equal(start, shift(period_end, ZONE_MARGIN)),
            ),
            "ChargePeriodStart",
            start,
            "is outside the plausible window around the billing period (from 731 days before "
            "its start to 3 days after its end)",
        )
        refuse(
            pc.greater(end, shift(period_end, LONGEST_TERM)),
            "ChargePeriodEnd",
            end,
            "is more than 1,127 days (a three-year term) after the billing period's end",
        )
        usage = pc.and_(
            pc.fill_null(pc.equal(out["charge_category"], "Usage"), False),
            pc.invert(pc.fill_null(pc.equal(out["charge_class"], "Correction"), False)),
        )
        refuse(
            pc.and_(
                usage,
                pc.or_(
                    pc.less(start, shift(period_start, -ZONE_MARGIN)),
                    pc.greater_equal(start, shift(period_end, ZONE_MARGIN)),
                ),
            ),
            "ChargePeriodStart",
            start,
            "is outside the billing period of this usage charge (only a correction, ChargeClass "
            "= Correction, may charge an earlier period)",
        )
        if not cost_floor:  # sums of rows that each passed it (per-request rows rolled up)
            return
        floor = pa.scalar(USAGE_COST_FLOOR, DEC)
        for field, column in (("billed_cost", "BilledCost"), ("effective_cost", "EffectiveCost")):
            refuse(
                pc.and_(usage, pc.less(out[field], floor)),
                column,
                out[field],
                f"is below {USAGE_COST_FLOOR} for a usage charge (a refund that large comes as "
                "a Credit line or a correction)",
                money=True,
            )

    # -- derived columns -------------------------------------------------------------------

    def _sku_details(
        self, array: pa.Array | None, first_row: int, length: int
    ) -> tuple[pa.Array, pa.Array]:
        """InstanceType and GpuCount from SkuPriceDetails (FOCUS 1.1+), null where absent."""
        if array is None:
            return pa.nulls(length, pa.string()), pa.nulls(length, pa.int32())
        details = self._json_object("SkuPriceDetails", array, first_row)
        encoded = pc.dictionary_encode(details)
        types, gpus = [], []
        for value in encoded.dictionary.to_pylist():
            if value not in self._sku:
                parsed = json.loads(value)
                instance = parsed.get("InstanceType")
                count = parsed.get("GpuCount")
                try:
                    count = int(count) if count is not None else None
                except (TypeError, ValueError):
                    count = None
                self._sku[value] = (str(instance) if instance else None, count)
            instance, count = self._sku[value]
            types.append(instance)
            gpus.append(count)
        return (
            pc.take(pa.array(types, pa.string()), encoded.indices),
            pc.take(pa.array(gpus, pa.int32()), encoded.indices),
        )

    def _usage_type_instances(self, array: pa.Array) -> pa.Array:
        encoded = pc.dictionary_encode(self._clean(array))
        found = []
        for value in encoded.dictionary.to_pylist():
            if value not in self._usage_types:
                self._usage_types[value] = instance_from_usage_type(value)
            found.append(self._usage_types[value])
        return pc.take(pa.array(found, pa.string()), encoded.indices)

    def _cost_kind(
        self, category: pa.Array, instance_type: pa.Array, gpu_count: pa.Array
    ) -> pa.Array:
        """The cost kind of each line, from its ServiceCategory and instance:

        - Compute, or AI and Machine Learning with an instance type: GPU compute when the SKU
          says GpuCount > 0 or the instance family carries accelerators (AWS p/g/trn/inf/dl
          families, GCP a2-/a3-/a4-/g2-, Azure NC/ND/NV), else CPU compute;
        - Storage: storage; Networking: network;
        - anything else (managed AI services without an instance, databases, tax): other.
        """
        encoded = pc.dictionary_encode(instance_type)
        flags = []
        for value in encoded.dictionary.to_pylist():
            if value not in self._gpu_types:
                self._gpu_types[value] = instance_is_gpu(value)
            flags.append(self._gpu_types[value])
        family_gpu = pc.fill_null(pc.take(pa.array(flags, pa.bool_()), encoded.indices), False)
        gpu = pc.or_(pc.fill_null(pc.greater(gpu_count, 0), False), family_gpu)
        has_instance = pc.is_valid(instance_type)
        compute = pc.fill_null(pc.equal(category, "Compute"), False)
        machine_learning = pc.fill_null(pc.equal(category, "AI and Machine Learning"), False)
        storage = pc.fill_null(pc.equal(category, "Storage"), False)
        network = pc.fill_null(pc.equal(category, "Networking"), False)
        runs = pc.or_(compute, pc.and_(machine_learning, has_instance))
        kind = pa.array([CostKind.OTHER.value] * len(category), pa.string())
        kind = pc.if_else(network, CostKind.NETWORK.value, kind)
        kind = pc.if_else(storage, CostKind.STORAGE.value, kind)
        kind = pc.if_else(runs, CostKind.CPU_COMPUTE.value, kind)
        kind = pc.if_else(
            pc.and_(pc.or_(compute, machine_learning), gpu), CostKind.GPU_COMPUTE.value, kind
        )
        return kind

    def _extra_json(self, extras: dict[str, pa.Array], length: int) -> pa.Array:
        """Provider columns (x_*) as one JSON object per row, built column-wise.

        Each column's distinct values are rendered once as `"key":"value",` fragments (the
        provider columns kept take few values), then the fragments are joined row by row.
        """
        if not extras:
            return pa.array(["{}"] * length, pa.string())
        parts = []
        for name, array in extras.items():
            encoded = pc.dictionary_encode(self._clean(array))
            key = json.dumps(name.strip())
            fragments = [f"{key}:{json.dumps(value)}," for value in encoded.dictionary.to_pylist()]
            # Nulls become empty fragments (Arrow's null-skipping join mishandles all-null input).
            part = pc.take(pa.array(fragments, pa.string()), encoded.indices)
            parts.append(pc.fill_null(part, ""))
        joined = pc.binary_join_element_wise(*parts, "")
        body = pc.utf8_slice_codeunits(joined, 0, -1)  # the last comma
        return pc.binary_join_element_wise("{", body, "}", "")


def _holds_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def _short(key: object) -> str:
    text = str(key)
    return repr(text if len(text) <= 40 else text[:39] + "…")


def _constant(array: pa.Array) -> bool:
    """Whether every value of the array is the same one (all null counts)."""
    if not len(array):
        return True
    if array.null_count:
        return array.null_count == len(array)
    return pc.all(pc.equal(array, array[0])).as_py()


def _moment(value: datetime | None) -> str | None:
    if value is None:
        return None
    return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}Z"


def _zoned(array: pa.Array) -> pa.Array:
    """Timestamps made explicit: a bare date gets midnight, a missing zone gets Z (UTC)."""
    text = pc.utf8_trim_whitespace(array)
    bare_date = pc.match_substring_regex(text, r"^\d{4}-\d{2}-\d{2}$")
    text = pc.if_else(bare_date, pc.binary_join_element_wise(text, "T00:00:00", ""), text)
    zoned = pc.match_substring_regex(text, r"([Zz]|[+-]\d\d(:?\d\d)?)$")
    return pc.if_else(zoned, text, pc.binary_join_element_wise(text, "Z", ""))


def _arrow_type(column: Column) -> pa.DataType:
    return {"decimal": DEC, "datetime": TS}.get(column.kind, pa.string())


def _expected(column: Column) -> str:
    if column.kind == "enum":
        return f"one of {', '.join(column.values)}"
    if column.kind == "decimal":
        return "a decimal number"
    if column.kind == "datetime":
        return DATETIME_EXAMPLE
    return "a value"
