"""Prometheus HTTP API /api/v1/query_range responses (resultType "matrix"), saved or pulled.

A response up to WHOLE_LIMIT is read whole and decoded with msgspec, a series at a time, into the
shape the points are expected in (twice the streaming parser's speed: bench/gpu_import.py). A
larger one is parsed as a stream with ijson's C backend, one series at a time, so a response of
any size takes the memory of its largest series. Whatever msgspec rejects is read again by the
streaming parser, which says where it breaks and what is wrong, so the messages are the same
either way. Values are strings so that "NaN" and "±Inf" can be sent; both are missing values here.
"""

import gc
import io
import json
from collections.abc import Iterator
from typing import NamedTuple

import ijson
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import (
    GpuMetricsError,
    MetricBatch,
    ParseContext,
    clean_values,
    first_outside,
    outside_window,
    reading_window,
)
from .dcgm import DCGM_METRICS, gpu_info_from_labels

# ijson's own choice is its fastest backend present (yajl2_c from the wheels); the pure-Python one
# is slow but says exactly where a document breaks.
_fast = ijson
_exact = ijson.get_backend("python")
HEAD_BYTES = 4096
# Past this size a syntax error is located to the block the fast parser was in, not re-parsed
# byte by byte by the slow one.
EXACT_POSITION_LIMIT = 32 * 1024 * 1024
# A response up to this size is held whole while its series are decoded (a pull asks for a day
# of one metric: 64 GPUs at 15 s are 7 MB); past it, it is streamed.
WHOLE_LIMIT = 64 * 1024 * 1024


class _Data(msgspec.Struct):
    result: list[msgspec.Raw]  # each series' bytes, decoded one at a time


class _Response(msgspec.Struct):
    data: _Data


class _Series(msgspec.Struct):
    """A series as it should be; anything else is decoded untyped and judged by _series_batch."""

    metric: dict[str, str]
    values: list[tuple[float, str]]


class _SeriesPoints(msgspec.Struct):
    """A series whose points are left as their bytes, for Arrow to read (_points_columns)."""

    metric: dict[str, str]
    values: msgspec.Raw


class _Columns(NamedTuple):
    """A series' points, already read: times and values, float64 (NaN and ±Inf as written)."""

    times: np.ndarray
    values: np.ndarray


_decode_response = msgspec.json.Decoder(_Response).decode
_decode_series = msgspec.json.Decoder(_Series).decode
_decode_series_points = msgspec.json.Decoder(_SeriesPoints).decode


class _Counting(io.RawIOBase):
    """The head already read, then the rest of the stream (an HTTP response cannot seek back),
    counting the bytes the parser has taken so that an error can say roughly where it was."""

    def __init__(self, head: bytes, rest):
        self.head = memoryview(head)
        self.rest = rest
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.head:
            size = min(len(buffer), len(self.head))
            buffer[:size] = self.head[:size]
            # A memoryview's slice copies nothing; the head is let go once it is read.
            self.head = self.head[size:] if size < len(self.head) else memoryview(b"")
        else:
            data = self.rest.read(len(buffer))
            size = len(data)
            buffer[:size] = data
        self.position += size
        return size


def _read_up_to(stream, head: bytes, limit: int) -> tuple[bytes, bool]:
    """`head` and what follows it in `stream`, until the end or past `limit` bytes; and whether
    the end was reached. A file's rest is read in one piece."""
    size = 1 << 20  # a stream of unknown length: a block at a time
    if stream.seekable():  # not fileno(): it would write an in-memory spool out to disk
        here = stream.tell()
        size = max(size, stream.seek(0, io.SEEK_END) - here)
        stream.seek(here)
    blocks, length = [head], len(head)
    while length <= limit:
        block = stream.read(min(size, limit + 1 - length))
        if not block:
            return b"".join(blocks), True
        blocks.append(block)
        length += len(block)
    return b"".join(blocks), False


def _head(stream, name: str) -> tuple[bytes, dict]:
    """The envelope's first fields (status, resultType), from the first bytes alone."""
    head = stream.read(HEAD_BYTES)
    found: dict = {}
    try:
        for prefix, event, value in _fast.parse(io.BytesIO(head)):
            if prefix in ("status", "data.resultType", "errorType", "error") and event == "string":
                found[prefix] = value
            if prefix == "data.result" and event == "start_array":
                found["result"] = True
                break
    except ijson.JSONError:
        pass  # the head ends mid-document; what was read before is enough
    return head, found


def _series_name(labels: dict) -> str:
    shown = ", ".join(
        f"{key}={labels[key]}"
        for key in ("UUID", "GPU_I_ID", "Hostname", "hostname")
        if key in labels
    )
    return f"{labels.get('__name__', '(no __name__)')}{{{shown}}}"


def _syntax_error(stream, name: str, exc: Exception, position: int) -> GpuMetricsError:
    """Say where the JSON broke: exactly when the file is small enough to re-read slowly."""
    where = f"near byte {position:,}"
    try:
        if stream.seekable() and position <= EXACT_POSITION_LIMIT:
            stream.seek(0)
            try:
                for _ in _exact.parse(stream):
                    pass
            except ijson.JSONError as slow:
                text = str(slow)
                if " at " in text:
                    at = int(text.rsplit(" at ", 1)[1])
                    stream.seek(0)
                    before = stream.read(at)
                    line = before.count(b"\n") + 1
                    column = at - (before.rfind(b"\n") + 1) + 1
                    where = f"line {line}, column {column}"
    except (OSError, ValueError):
        pass
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid JSON"
    if "premature EOF" in reason or "Incomplete" in reason:
        where, reason = "at the end", "it stops in the middle of the JSON; is the file cut short?"
    return GpuMetricsError(f"{name}: {where}: not valid JSON ({reason}).")


def parse(stream, *, context: ParseContext) -> Iterator[MetricBatch]:
    name = context.name
    head, envelope = _head(stream, name)
    if envelope.get("status") == "error":
        try:
            body = json.loads(head + stream.read(1024 * 1024))
            reason = f"{body.get('errorType', 'error')}: {body.get('error', '')}"
        except (ValueError, AttributeError):
            reason = envelope.get("error", "no reason given")
        raise GpuMetricsError(f"{name}: Prometheus answered with an error ({reason}).")
    if envelope.get("status") != "success" or "result" not in envelope:
        raise GpuMetricsError(
            f"{name}: not a Prometheus query_range response (expected "
            '{"status": "success", "data": {"resultType": "matrix", "result": [...]}}).'
        )
    if envelope.get("data.resultType") != "matrix":
        raise GpuMetricsError(
            f"{name}: resultType is {envelope.get('data.resultType')!r}; save a query_range "
            "response (resultType matrix), not an instant query."
        )
    data, ended = _read_up_to(stream, head, WHOLE_LIMIT)
    gpu_ids: dict[tuple, int] = {}
    # The parsers make millions of small acyclic objects; the cyclic collector would walk them
    # over and over to find nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if ended:
            series = _whole_series(data)
            if series is None:  # not what msgspec expects: the stream parser says what is wrong
                yield from _streamed(io.BytesIO(data), b"", context, gpu_ids)
                return
            try:
                for number, item in enumerate(series, start=1):
                    batch = _series_batch(item, number, context, gpu_ids)
                    if batch is not None:
                        yield batch
            except (_NotJson, OverflowError) as exc:
                # Bytes or numbers in a series that msgspec refuses (invalid UTF-8, 1e400) or
                # takes as no float can hold (an integer of 400 digits): the stream parser,
                # which refuses both, reads it all again (yielding nothing more: the import
                # fails) to say where and what, as it would have.
                for _ in _streamed(io.BytesIO(data), b"", context, gpu_ids):
                    pass
                reason = getattr(exc, "reason", exc)
                raise GpuMetricsError(f"{context.name}: not valid JSON ({reason}).") from None
        else:
            yield from _streamed(stream, data, context, gpu_ids)
    finally:
        if collecting:
            gc.enable()


class _NotJson(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def _whole_series(whole: bytes) -> Iterator[dict] | None:
    """The series of a response held whole, or None where it is not valid JSON of that shape.
    Only the series are read: what lies beside them (warnings, infos) is skipped unread."""
    try:
        raws = _decode_response(whole).data.result
    except msgspec.DecodeError:  # ValidationError is one
        return None
    return (_one_series(raw) for raw in raws)


def _one_series(raw: msgspec.Raw) -> dict:
    try:
        series = _decode_series_points(raw)
    except msgspec.DecodeError:  # not the usual shape, or not JSON: judged below as before
        pass
    else:
        columns = _points_columns(bytes(series.values))
        if columns is not None:
            return {"metric": series.metric, "values": columns}
    try:
        series = _decode_series(raw)
    except msgspec.ValidationError:
        try:
            return msgspec.json.decode(raw)  # not the shape expected: judged as it is
        except (msgspec.DecodeError, OverflowError) as exc:
            raise _NotJson(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise _NotJson(str(exc)) from None
    return {"metric": series.metric, "values": series.values}


def _points_columns(raw: bytes) -> _Columns | None:
    """The points of a series, `[[<time>,"<value>"],...]` as Prometheus writes them (no space,
    no escape), read by Arrow without a Python object per point (decoding them took three
    quarters of the import's parsing: bench/gpu_import.py). None for anything else, and for a
    time no double holds; the decoder then reads and judges the series as before.

    Without its brackets and quotes the text is "<time>,<value>,<time>,<value>,...", which
    Arrow splits and reads as doubles, the values as the decoder's path reads them. What makes
    sure nothing else reads so (msgspec has checked that the bytes are JSON): P points are
    separated by P - 1 `"],[`, and each value opens after a `,"`; with the `[[` and `"]]` at
    the ends these hold 4P + 2 brackets and quotes, so if as many were taken out there is no
    other (a `,"` sharing its quote with a `"],[` or the end would leave an empty field): one
    string per point, last in it; and 2P fields, none empty, make a number and a string each.
    """
    if not (raw.startswith(b"[[") and raw.endswith(b'"]]')):
        return None
    if any(byte in raw for byte in (b" ", b"\n", b"\r", b"\t", b"\\")):
        return None
    points = raw.count(b'"],[') + 1
    flat = raw.translate(None, b'[]"')
    if len(raw) - len(flat) != 4 * points + 2 or raw.count(b',"') != points:
        return None
    offsets = pa.py_buffer(np.array([0, len(flat)], dtype=np.int32))
    fields = pc.split_pattern(
        pa.StringArray.from_buffers(1, offsets, pa.py_buffer(flat)), pattern=","
    ).flatten()
    if len(fields) != 2 * points:
        return None
    try:
        numbers = pc.cast(fields, pa.float64()).to_numpy()  # "" and anything else: refused
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    times = numbers[0::2]
    if not np.isfinite(times).all():
        return None
    return _Columns(times, numbers[1::2])


def _streamed(stream, head: bytes, context: ParseContext, gpu_ids: dict) -> Iterator[MetricBatch]:
    """The series of `head` and then the rest of `stream`, parsed as they arrive."""
    counting = _Counting(head, stream)
    reader = io.BufferedReader(counting, buffer_size=1 << 20)
    items = _fast.items(reader, "data.result.item", use_float=True, buf_size=1 << 20)
    number = 0
    while True:
        try:
            series = next(items)
        except StopIteration:
            break
        except ijson.JSONError as exc:
            raise _syntax_error(stream, context.name, exc, counting.position) from None
        number += 1
        batch = _series_batch(series, number, context, gpu_ids)
        if batch is not None:
            yield batch


def _series_batch(
    series, number: int, context: ParseContext, gpu_ids: dict[tuple, int]
) -> MetricBatch | None:
    name = context.name
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        raise GpuMetricsError(f'{name}: series {number}: has no "metric" object.')
    labels = series["metric"]
    metric_name = labels.get("__name__", "")
    known = DCGM_METRICS.get(metric_name)
    if known is None:
        if not metric_name:
            raise GpuMetricsError(
                f"{name}: series {number}: has no __name__ label, so which metric it is "
                "is unknown (query the bare series, e.g. DCGM_FI_DEV_GPU_UTIL, not an expression)."
            )
        return None
    metric, factor = known
    values = series.get("values")
    if values is None:
        if "histograms" in series:
            return None
        raise GpuMetricsError(f"{name}: series {number} {_series_name(labels)}: has no values.")
    if isinstance(values, _Columns):
        ts, parsed = values
    elif not values:
        return None
    else:
        try:
            stamps, texts = zip(*values, strict=True)
            ts = np.array(stamps, dtype=np.float64)
            # Arrow's string-to-double cast is twice as fast as numpy's and reads NaN and ±Inf.
            parsed = pc.cast(pa.array(texts, type=pa.string()), pa.float64()).to_numpy()
        except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
            raise _point_error(values, number, labels, name) from None
    window = reading_window()
    position = first_outside(ts, window)
    if position is not None:
        raise GpuMetricsError(
            f"{name}: series {number} {_series_name(labels)}, point {position + 1}: "
            f"{outside_window(float(ts[position]), window)}."
        )
    info = gpu_info_from_labels(labels, fallback_host=context.host)
    if info is None:
        return None
    if not info.host:
        raise GpuMetricsError(
            f"{name}: series {number} {_series_name(labels)}: names no Hostname label; say which "
            "host it is (--host, or the source's host)."
        )
    key = tuple(sorted(labels.items()))
    gpu_id = gpu_ids.get(key)
    if gpu_id is None:
        gpu_id = gpu_ids[key] = context.gpu_id(info)
    if factor != 1.0:
        parsed = parsed * factor
    return MetricBatch(np.full(len(ts), gpu_id, dtype=np.int64), ts, {metric: clean_values(parsed)})


def _point_error(values, number: int, labels: dict, name: str) -> GpuMetricsError:
    """Find the first point that is not [<unix time>, "<number>"] and say which it is."""
    for position, point in enumerate(values, start=1):
        where = f"{name}: series {number} {_series_name(labels)}, point {position}"
        if not isinstance(point, list | tuple) or len(point) != 2:
            return GpuMetricsError(f'{where}: expected [<unix time>, "<value>"], got {point!r}.')
        stamp, text = point
        if not isinstance(stamp, int | float) or isinstance(stamp, bool):
            return GpuMetricsError(f"{where}: the time {stamp!r} is not a number.")
        try:
            float(text)
        except (TypeError, ValueError):
            return GpuMetricsError(f"{where}: the value {text!r} is not a number.")
    return GpuMetricsError(f"{name}: series {number} {_series_name(labels)}: malformed values.")
