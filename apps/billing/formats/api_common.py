"""What the hosted-API formats share: their rows made FOCUS lines of model API spend.

Every line is usage (`ChargeCategory` Usage, usage-based), in the service category AI and Machine
Learning, with a billing period of the calendar month (UTC) its charge starts in: one delivery
per provider account and month, replaced whole by a newer file for the month. The key or project
billed is the line's ResourceId (an API key, else the project, workspace or team), the project,
workspace or team its SubAccountId. Formats work on whole columns; Python looks only at distinct
values (months, line items, models).
"""

import contextlib
import json
from decimal import Decimal, InvalidOperation
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SourceValueError
from ..model_api import API_DIRECTION, API_MODEL, API_REQUESTS, API_TOKENS
from ..normalise import SOURCE_INDEX, clean_strings
from ..ports import prices_for

DEC = pa.decimal128(38, 15)
# Counts (tokens, requests) are whole numbers: a narrow decimal keeps their sums in range.
COUNT = pa.decimal128(24, 0)
STRING = pa.string()
CATEGORY = "AI and Machine Learning"
ISO = "%Y-%m-%dT%H:%M:%SZ"
QUANTUM = Decimal("1e-15")


@cache
def zero() -> pa.Scalar:
    """A count of 0, made when first needed: a pyarrow scalar made from a Python value imports
    pandas (to ask whether it is a pandas object), which every process paid at startup."""
    return pa.scalar(Decimal(0), COUNT)


def text(batch: pa.RecordBatch, name: str | None) -> pa.Array:
    """A source column as text with nulls made real (absent: all null)."""
    if name is None or name not in batch.schema.names:
        return pa.nulls(batch.num_rows, STRING)
    return clean_strings(batch.column(batch.schema.names.index(name)))


def constant(value: str | None, length: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, STRING), length)


def unix_seconds(array: pa.Array, column: str) -> pa.Array:
    """Unix seconds (OpenAI's bucket times) as ISO text in UTC."""
    try:
        seconds = pc.cast(pc.cast(array, pa.float64()), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for index, value in enumerate(array.to_pylist()):
            try:
                float(value)
            except (TypeError, ValueError):
                raise SourceValueError(index, column, value, "a time in Unix seconds") from None
        raise
    moments = pc.cast(seconds, pa.timestamp("s", tz="UTC"))
    return pc.strftime(moments, ISO)


def integers(array: pa.Array, column: str) -> pa.Array:
    """A count of tokens or requests (`10`, or `10.0` as exports write them), whole."""
    # The common case parses quickest as integers; Arrow's integer cast also reads hexadecimal
    # (0x1A), which is no count: text with an x takes the decimal path, which refuses it.
    if not pc.any(pc.match_substring(array, "x", ignore_case=True)).as_py():
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return pc.cast(pc.cast(array, pa.int64()), COUNT)
    try:
        return pc.cast(pc.cast(array, DEC), COUNT)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for index, value in enumerate(array.to_pylist()):
            if value is None:
                continue
            try:
                number = Decimal(value)
                if not number.is_finite() or number != number.to_integral_value():
                    raise InvalidOperation
            except (InvalidOperation, ValueError):
                raise SourceValueError(index, column, value, "a whole number") from None
        raise


def decimals(array: pa.Array, column: str, *, scale: Decimal | None = None) -> pa.Array:
    """Money as text → decimal (exactly), divided by `scale` where the source counts cents."""
    values = array.to_pylist() if scale is not None else None
    if values is None:
        try:
            return pc.cast(array, DEC)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = array.to_pylist()
    out = []
    for index, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        try:
            number = Decimal(value.strip())
            if not number.is_finite():
                raise InvalidOperation
        except (InvalidOperation, ValueError, AttributeError):
            expected = "a decimal number of cents" if scale is not None else "a decimal number"
            raise SourceValueError(index, column, value, expected) from None
        if scale is not None:
            number = (number / scale).quantize(QUANTUM)
        out.append(number)
    return pa.array(out, DEC)


def _month_end(month: str) -> str:
    year, number = int(month[:4]), int(month[5:7])
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return f"{year:04d}-{number:02d}-01T00:00:00Z"


def billing_period(start: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The calendar month (UTC) of each ISO charge start: its first day and the next month's."""
    month = pc.utf8_slice_codeunits(start, 0, 7)
    first = pc.binary_join_element_wise(month, "-01T00:00:00Z", "")
    encoded = pc.dictionary_encode(month)
    ends = [None if m is None else _month_end(m) for m in encoded.dictionary.to_pylist()]
    return first, pc.take(pa.array(ends, STRING), encoded.indices)


def tags_from_list(array: pa.Array, column: str) -> pa.Array:
    """LiteLLM's request tags (a JSON list) as a tag object: `team:search` → {"team": "search"},
    a bare tag → {"tag": ""} (so rules and aliases can read them)."""
    encoded = pc.dictionary_encode(array)
    objects = []
    for value in encoded.dictionary.to_pylist():
        try:
            items = json.loads(value) if value else []
        except json.JSONDecodeError:
            index = pc.index(array, value).as_py()
            raise SourceValueError(index, column, value, "a JSON list of tags") from None
        if not isinstance(items, list):
            index = pc.index(array, value).as_py()
            raise SourceValueError(index, column, value, "a JSON list of tags")
        tags = {}
        for item in items:
            key, _, tag_value = str(item).partition(":")
            tags[key.strip()] = tag_value.strip()
        objects.append(json.dumps(tags))
    return pc.take(pa.array(objects, STRING), encoded.indices)


def lines(
    length: int,
    *,
    start: pa.Array,
    end: pa.Array,
    cost: pa.Array,
    currency: pa.Array,
    account: pa.Array,
    provider: pa.Array,
    service: pa.Array,
    resource: pa.Array,
    sub_account: pa.Array,
    model: pa.Array,
    direction: pa.Array,
    tokens: pa.Array,
    requests: pa.Array,
    description: pa.Array,
    tags: pa.Array | None = None,
) -> dict[str, pa.Array]:
    """FOCUS-named columns of model API lines (and the model API columns beside them)."""
    period_start, period_end = billing_period(start)
    out = {
        "BillingAccountId": account,
        "BillingPeriodStart": period_start,
        "BillingPeriodEnd": period_end,
        "ChargePeriodStart": start,
        "ChargePeriodEnd": end,
        "ChargeCategory": constant("Usage", length),
        "ChargeFrequency": constant("Usage-Based", length),
        "BilledCost": cost,
        "EffectiveCost": cost,
        "BillingCurrency": currency,
        "ProviderName": provider,
        "ServiceName": service,
        "ServiceCategory": constant(CATEGORY, length),
        "ResourceId": resource,
        "SubAccountId": sub_account,
        "ChargeDescription": description,
        "ConsumedQuantity": tokens,
        "ConsumedUnit": pc.if_else(pc.is_valid(tokens), "Tokens", pa.scalar(None, STRING)),
        API_MODEL: model,
        API_DIRECTION: direction,
        API_TOKENS: tokens,
        API_REQUESTS: requests,
    }
    if tags is not None:
        out["Tags"] = tags
    return out


def explode(parts: list[dict[str, pa.Array]], keep: pa.Array | None = None) -> dict:
    """Several lines from each source row (one per token direction): the parts concatenated,
    each line knowing its source row (SOURCE_INDEX); `keep` drops lines (no tokens)."""
    names = list(parts[0])
    length = len(parts[0][names[0]])
    out = {name: pa.concat_arrays([_array(part[name]) for part in parts]) for name in names}
    out[SOURCE_INDEX] = pa.concat_arrays([pa.array(range(length), pa.int64()) for _ in parts])
    if keep is not None:
        out = {name: array.filter(keep) for name, array in out.items()}
    return out


def _array(array) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def priced(
    provider: str,
    model: pa.Array,
    direction: str,
    tokens: pa.Array,
    unpriced: set[str],
    cache: dict[str, dict[str, Decimal]],
) -> pa.Array:
    """Tokens × the catalogue's price per token for the model and direction (through billing's
    `model_prices` port); a model or direction without a price costs nothing and is noted."""
    names = pc.unique(pc.fill_null(model, "unknown")).to_pylist()
    missing = [name for name in names if name not in cache]
    if missing:
        found = prices_for(provider=provider, models=missing)
        for name in missing:
            cache[name] = found.get(name, {})
    out = []
    for name, count in zip(
        pc.fill_null(model, "unknown").to_pylist(), tokens.to_pylist(), strict=True
    ):
        price = cache[name].get(direction)
        if price is None:
            if count:
                unpriced.add(f"{name} ({direction.replace('_', ' ')})")
            price = Decimal(0)
        out.append((Decimal(count or 0) * price).quantize(QUANTUM))
    return pa.array(out, DEC)


# A 64-bit hash of each id, computed on the string column's buffers at once (no Python per row):
# a polynomial in an odd multiplier over the bytes, then splitmix64's finaliser.
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


# Strings hashed at once: the arrays of one value per byte stay a few MB.
HASH_SLICE = 8192


def id_hashes(array: pa.Array) -> np.ndarray:
    """A 64-bit hash of every (non-null) string of the array, as a numpy array."""
    array = _array(array)
    if not pa.types.is_large_string(array.type):
        array = pc.cast(array, pa.large_string())
    if len(array) > HASH_SLICE:
        return np.concatenate(
            [
                _slice_hashes(array.slice(start, HASH_SLICE))
                for start in range(0, len(array), HASH_SLICE)
            ]
        )
    return _slice_hashes(array)


def _slice_hashes(array: pa.Array) -> np.ndarray:
    count = len(array)
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64, count + 1, array.offset * 8)
    lengths = np.diff(offsets)
    if data_buffer is None or not count or offsets[-1] == offsets[0]:
        data = np.zeros(0, np.uint64)
    else:
        data = np.frombuffer(data_buffer, np.uint8, offsets[-1] - offsets[0], offsets[0])
    starts = offsets[:-1] - offsets[0]
    longest = int(lengths.max()) if count else 0
    with np.errstate(over="ignore"):
        powers = np.ones(max(longest, 1), np.uint64)
        if longest > 1:
            powers[1:] = np.cumprod(np.full(longest - 1, _MULTIPLIER, np.uint64))
        position = np.arange(len(data), dtype=np.int64) - np.repeat(starts, lengths)
        terms = (data.astype(np.uint64) + np.uint64(1)) * powers[position]
        hashes = np.zeros(count, np.uint64)
        filled = lengths > 0
        if len(data):
            hashes[filled] = np.add.reduceat(terms, starts[filled])
        hashes ^= lengths.astype(np.uint64) * _MIX_2
        hashes ^= hashes >> np.uint64(30)
        hashes *= _MIX_1
        hashes ^= hashes >> np.uint64(27)
        hashes *= _MIX_2
        hashes ^= hashes >> np.uint64(31)
    return hashes


class SeenIds:
    """The ids a file has listed so far, by their 64-bit hash, sorted: 8 bytes an id (a million
    ids take 8 MB; two ids sharing a hash in a million is a chance of about 1 in 30 million)."""

    def __init__(self) -> None:
        self.hashes = np.zeros(0, np.uint64)

    def __len__(self) -> int:
        return len(self.hashes)

    def contains(self, values: np.ndarray) -> np.ndarray:
        if not len(self.hashes):
            return np.zeros(len(values), bool)
        places = np.minimum(np.searchsorted(self.hashes, values), len(self.hashes) - 1)
        return self.hashes[places] == values

    def add(self, sorted_values: np.ndarray) -> None:
        # Each new hash goes where it sorts: one new array, in linear time.
        places = np.searchsorted(self.hashes, sorted_values)
        self.hashes = np.insert(self.hashes, places, sorted_values)


def unique_rows(keys: pa.Array, seen: SeenIds, column: str) -> tuple[pa.Array | None, int]:
    """Which rows to keep so that a key (a request or generation id) counts once in a file:
    a key seen before (an earlier row, or the same request twice in overlapping pages) is
    dropped; the first row listing it stays."""
    keys = _array(keys)
    if keys.null_count:
        index = pc.index(pc.is_null(keys), True).as_py()
        raise SourceValueError(index, column, None, "a request id")
    hashes = id_hashes(keys)
    order = np.argsort(hashes, kind="stable")  # equal hashes keep their rows' order
    ordered = hashes[order]
    first = np.ones(len(ordered), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    keep_ordered = first & ~seen.contains(ordered)
    seen.add(ordered[keep_ordered])
    dropped = len(ordered) - int(keep_ordered.sum())
    if not dropped:
        return None, 0
    keep = np.empty(len(ordered), bool)
    keep[order] = keep_ordered
    return pa.array(keep, pa.bool_()), dropped


def add_note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)
