"""Opening a billing file: what it is, its header, and its rows in batches, in constant memory.

CSV (plain or gzip) is read with pyarrow's streaming CSV reader, every column as text, so that
validation decides what a value means and can say which row was wrong; Parquet is read in row
groups. The SHA-256 of the file's bytes is computed as they stream by.
"""

import codecs
import contextlib
import csv
import gzip
import hashlib
import io
import json
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from . import json_pages
from .errors import BillingFileError, BillingRowError

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 64 * 1024
CSV_BLOCK_BYTES = 64 << 20  # larger than any chunk: each chunk parses as one block
HASH_CHUNK = 1 << 20
NULL_SPELLINGS = ["", "NULL", "null", "Null"]
MAX_RECORD_BYTES = 64 << 20
PARQUET_UNREADABLE = "is not a readable Parquet file (truncated, corrupt or not Parquet)"


class _Hasher(threading.Thread):
    """SHA-256 of a file, read on a thread of its own beside the parser.

    Reading the file twice costs less than pushing every block through Python for the parser's
    sake (the page cache serves the second read), and hashlib releases the GIL.
    """

    def __init__(self, path: Path):
        super().__init__(name="costsite-hash", daemon=True)
        self.path = path
        self.digest = hashlib.sha256()
        self.error: OSError | None = None
        self.cancelled = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            with self.path.open("rb") as handle:
                while not self.cancelled.is_set() and (chunk := handle.read(HASH_CHUNK)):
                    self.digest.update(chunk)
        except OSError as exc:
            self.error = exc

    def hexdigest(self) -> str:
        self.join()
        if self.error is not None:
            raise self.error
        return self.digest.hexdigest()


@dataclass
class SourceFile:
    """One file, inspected: its kind, header and size. Rows come from `batches()`."""

    path: Path
    kind: str  # csv, gzip, parquet, ndjson (newline-delimited JSON) or json (API pages)
    header: list[str]
    size: int
    parquet_rows: int | None = None
    gzipped: bool = False
    sha256: str = ""
    bytes_read: int = 0
    json_shape: str = ""  # json: the page shape (json_pages.SHAPES)
    _columns: list[str] = field(default_factory=list)
    # json: the last batches read, each as its first row number and the JSON path of each row
    # (several: a batch read ahead on a thread may have followed the one whose row failed).
    _json_batches_read: deque = field(default_factory=lambda: deque(maxlen=3))

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def first_row(self) -> int:
        """The number of the first data row: CSV's header is row 1; NDJSON has none."""
        return 1 if self.kind in ("ndjson", "json") else 2

    def json_row_error(self, exc: BillingRowError) -> BillingRowError:
        """A row error of a JSON page file said by the JSON path of the value."""
        for first, paths in self._json_batches_read:
            if 0 <= exc.row - first < len(paths):
                break
        else:
            return exc
        path = f"{paths[exc.row - first]}.{exc.column}"
        message = str(exc).split(f"column {exc.column}: ", 1)[-1]
        error = BillingRowError(self.label, exc.row, exc.column, exc.value, "")
        error.args = (f"{self.label}: {path} (record {exc.row}): {message}",)
        return error

    def fail(self, problem: str) -> BillingFileError:
        return BillingFileError(self.label, problem)

    def batches(self, columns: list[str], *, rows: int) -> Iterator[pa.RecordBatch]:
        """Batches of about `rows` rows holding `columns`, read as text for CSV."""
        if self.kind == "parquet":
            yield from self._parquet_batches(columns, rows)
        elif self.kind == "ndjson":
            yield from self._ndjson_batches(columns, rows)
        elif self.kind == "json":
            yield from self._json_batches(columns, rows)
        else:
            yield from self._csv_batches(columns, rows)

    def _csv_batches(self, columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
        """Cut the text at record boundaries into chunks and parse each with pyarrow.

        Driving the chunks ourselves keeps memory to one chunk (pyarrow's streaming reader reads
        dozens of blocks ahead) and lets a malformed row be named by its line.
        """
        hasher = _Hasher(self.path)
        raw = pa.OSFile(str(self.path), "r")
        stream = pa.CompressedInputStream(raw, "gzip") if self.kind == "gzip" else raw
        # One block per chunk: a single-chunk table needs no combining, and one thread leaves
        # the other core to the database.
        read_options = pcsv.ReadOptions(
            column_names=self.header, block_size=CSV_BLOCK_BYTES, use_threads=False
        )
        convert_options = pcsv.ConvertOptions(
            column_types=dict.fromkeys(columns, pa.string()),
            include_columns=columns,
            # The parser turns the usual spellings of null into nulls as it goes.
            null_values=NULL_SPELLINGS,
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        )
        chunk_bytes = max(int(rows) * 400, 256)
        records_before = 0  # data records before the current chunk
        carry = b""
        header_pending = True
        try:
            while True:
                # One buffer per chunk, filled in place: the tail after the last whole record
                # (`carry`) moves to the front of the next one.
                buffer = bytearray(len(carry) + chunk_bytes)
                buffer[: len(carry)] = carry
                got = _read_into(stream, memoryview(buffer)[len(carry) :])
                self.bytes_read = raw.tell()
                size = len(carry) + got
                if got == 0:
                    cut = size
                    if buffer.count(b'"', 0, size) % 2:
                        # The last quoted field never closes: it would swallow every row
                        # after it, so say where it opens instead.
                        raise self._open_quote(buffer, size, records_before, header_pending)
                else:
                    cut = _record_boundary(buffer, size)
                    if cut <= 0:
                        if size > MAX_RECORD_BYTES:
                            raise self.fail(
                                "has an unterminated quote (or a row over "
                                f"{MAX_RECORD_BYTES >> 20} MiB) after row {records_before + 1}"
                            )
                        carry = bytes(buffer[:size])  # no complete record yet: read more
                        chunk_bytes *= 2
                        continue
                view = memoryview(buffer)
                start = 0
                if header_pending:
                    if buffer.startswith(codecs.BOM_UTF8):
                        start = len(codecs.BOM_UTF8)
                    start = _first_record_end(buffer, start, cut)
                    header_pending = False
                carry = bytes(view[cut:size])
                table = None
                if cut > start:
                    table = self._parse(
                        view[start:cut], records_before, read_options, convert_options
                    )
                    records_before += table.num_rows
                # The parsed batch owns its memory: the text is let go before it is used.
                del view, buffer
                if table is not None and table.num_rows:
                    batch = table.combine_chunks().to_batches()[0]
                    del table
                    yield batch
                    del batch
                if got == 0:
                    break
        except (pa.ArrowInvalid, OSError, EOFError, zlib.error) as exc:
            hasher.cancelled.set()
            raise self._csv_error(exc) from exc
        except BaseException:
            hasher.cancelled.set()
            raise
        finally:
            raw.close()
        self.sha256 = hasher.hexdigest()
        self.bytes_read = self.size

    def _open_quote(
        self, buffer: bytearray, size: int, records_before: int, header_pending: bool
    ) -> BillingFileError:
        """The error for a quote left open at the end of the file, naming the row it opens in."""
        start = 0
        if header_pending:
            if buffer.startswith(codecs.BOM_UTF8):
                start = len(codecs.BOM_UTF8)
            if _first_record_end(buffer, start, size) >= size:
                return self.fail("has an unterminated quote in its header row")
            start = _first_record_end(buffer, start, size)
        cut = max(_record_boundary(buffer, size), start)
        whole = 0
        if cut > start:
            serial = pcsv.ReadOptions(column_names=self.header, use_threads=False)
            parse = pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=lambda _: "skip")
            whole = pcsv.read_csv(
                pa.py_buffer(bytes(buffer[start:cut])), read_options=serial, parse_options=parse
            ).num_rows
        row = records_before + whole + 2  # the header is row 1
        return self.fail(
            f"row {row} has an unterminated quote: a quoted field opens and never closes (a "
            '" is missing or stray)'
        )

    def _parse(self, chunk: bytes, records_before: int, read_options, convert_options) -> pa.Table:
        bad_rows: list[pcsv.InvalidRow] = []

        def invalid_row(row: pcsv.InvalidRow) -> str:
            bad_rows.append(row)
            return "error"

        parse_options = pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=invalid_row)
        try:
            return pcsv.read_csv(
                pa.py_buffer(chunk),
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options,
            )
        except pa.ArrowInvalid as exc:
            if not bad_rows:
                raise
            # Parse the chunk again on one thread: only then does pyarrow number the record.
            bad_rows.clear()
            serial = pcsv.ReadOptions(column_names=self.header, use_threads=False)
            with contextlib.suppress(pa.ArrowInvalid):
                pcsv.read_csv(
                    pa.py_buffer(chunk),
                    read_options=serial,
                    parse_options=parse_options,
                    convert_options=convert_options,
                )
            row = bad_rows[0] if bad_rows else None
            if row is None:
                raise self.fail(f"cannot be read as CSV: {exc}") from exc
            # The header is row 1; pyarrow counts the chunk's records from 1.
            where = f"row {records_before + row.number + 1}" if row.number else "a row"
            text = row.text if len(row.text) <= 80 else row.text[:79] + "…"
            raise self.fail(
                f"{where} has {row.actual_columns} fields where the header has "
                f"{row.expected_columns}: {text!r}"
            ) from exc

    def _csv_error(self, exc: Exception) -> BillingFileError:
        if isinstance(exc, BillingFileError):
            return exc
        message = str(exc)
        if self.kind == "gzip" and (
            "compressed" in message.lower() or "gzip" in message.lower() or "zlib" in message
        ):
            return self.fail("is a truncated or corrupt gzip file")
        if "UTF8" in message or "utf-8" in message.lower():
            return self.fail("is not UTF-8 text")
        return self.fail(f"cannot be read as CSV: {message}")

    def _ndjson_batches(self, columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
        """Records flattened to dotted names (`service.description`), every value as text;
        lists and objects below the top level stay JSON text for the format to read."""
        hasher = _Hasher(self.path)
        opener = gzip.open if self.gzipped else open
        wanted = set(columns)
        try:
            with opener(self.path, "rt", encoding="utf-8-sig") as handle:
                raw = getattr(handle, "buffer", None)
                values: dict[str, list] = {name: [] for name in columns}
                count = 0
                for number, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise self.fail(
                            f"row {number} is not a JSON object ({exc.msg} at character "
                            f"{exc.pos + 1})"
                        ) from None
                    if not isinstance(record, dict):
                        raise self.fail(f"row {number} is not a JSON object")
                    flat = _flatten(record, wanted)
                    for name in columns:
                        values[name].append(flat.get(name))
                    count += 1
                    if count == rows:
                        yield _text_batch(values, columns)
                        values = {name: [] for name in columns}
                        count = 0
                        if raw is not None and hasattr(raw, "tell"):
                            self.bytes_read = min(self.size, raw.tell())
                if count:
                    yield _text_batch(values, columns)
        except (OSError, EOFError, zlib.error) as exc:
            hasher.cancelled.set()
            raise self.fail("is a truncated or corrupt gzip file") from exc
        except UnicodeDecodeError as exc:
            hasher.cancelled.set()
            raise self.fail("is not UTF-8 text") from exc
        except BaseException:
            hasher.cancelled.set()
            raise
        self.sha256 = hasher.hexdigest()
        self.bytes_read = self.size

    def _json_batches(self, columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
        """The rows of saved API pages (json_pages), every value as text."""
        hasher = _Hasher(self.path)
        values: dict[str, list] = {name: [] for name in columns}
        paths: list[str] = []
        number = 0
        try:
            for path, flat in json_pages.records(self.path, self.gzipped, self.json_shape):
                for name in columns:
                    values[name].append(flat.get(name))
                paths.append(path)
                number += 1
                if len(paths) == rows:
                    self._json_batches_read.append((number - len(paths) + 1, paths))
                    yield _text_batch(values, columns)
                    values = {name: [] for name in columns}
                    paths = []
            if paths:
                self._json_batches_read.append((number - len(paths) + 1, paths))
                yield _text_batch(values, columns)
        except (ValueError, json_pages.ijson.JSONError) as exc:  # ijson's and the shape's
            hasher.cancelled.set()
            raise self.fail(f"is not a readable page of JSON: {exc}") from exc
        except (OSError, EOFError, zlib.error) as exc:
            hasher.cancelled.set()
            raise self.fail("is a truncated or corrupt gzip file") from exc
        except BaseException:
            hasher.cancelled.set()
            raise
        self.sha256 = hasher.hexdigest()
        self.bytes_read = self.size

    def _parquet_batches(self, columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
        hasher = _Hasher(self.path)
        try:
            parquet = pq.ParquetFile(self.path)
            yield from parquet.iter_batches(batch_size=rows, columns=columns)
        except (pa.ArrowInvalid, OSError) as exc:
            hasher.cancelled.set()
            raise self.fail(PARQUET_UNREADABLE) from exc
        except BaseException:
            hasher.cancelled.set()
            raise
        self.sha256 = hasher.hexdigest()
        self.bytes_read = self.size


_END = object()
T = TypeVar("T")


def read_ahead(batches: Iterator[T]) -> Iterator[T]:
    """The batches, the next one read (and mapped) on a thread while the caller works on this
    one.

    For a load whose database side is light (rolled-up requests): pyarrow parses without the
    GIL, so the two overlap on two cores. The thread starts on a batch only once the caller has
    taken the one before, so at most two are in memory; an error raised reading comes out here,
    where its batch would; a caller that stops early stops the reading.
    """
    handed: Queue = Queue(maxsize=1)
    taken = threading.Event()  # the caller has taken the last batch handed over
    taken.set()
    stop = threading.Event()

    def produce() -> None:
        try:
            while True:
                while not taken.wait(timeout=0.05):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                taken.clear()
                try:
                    item = (next(batches), None)
                except StopIteration:
                    item = (_END, None)
                handed.put(item)
                if item[0] is _END:
                    return
        except BaseException as exc:  # handed to the caller
            handed.put((None, exc))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="costsite-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            batch, error = handed.get()
            taken.set()
            if error is not None:
                raise error
            if batch is _END:
                return
            yield batch
    finally:
        stop.set()
        thread.join()


def _flatten(record: dict, wanted: set[str], prefix: str = "") -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in wanted:
            out.update(_flatten(value, wanted, f"{name}."))
        elif value is None:
            out[name] = None
        elif isinstance(value, (dict, list)):
            out[name] = json.dumps(value)
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, float):
            out[name] = repr(value)
        else:
            out[name] = str(value)
    return out


def _text_batch(values: dict[str, list], columns: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(values[name], pa.string()) for name in columns], names=columns
    )


def _record_boundary(data: bytearray, size: int) -> int:
    """Where the last whole record in data[:size] ends: just after the last newline outside
    quotes. Quotes are counted from the start, which is a record boundary; a quoted field's
    doubled quotes keep the count even. -1 when there is none."""
    position = data.rfind(b"\n", 0, size)
    # numpy counts a chunk's quotes three or four times quicker than bytearray.count.
    quotes = _quotes(data, position) if position >= 0 else 0
    while position >= 0 and quotes % 2:
        previous = data.rfind(b"\n", 0, position)
        quotes -= data.count(b'"', previous + 1 if previous >= 0 else 0, position)
        position = previous
    return position + 1 if position >= 0 else -1


def _quotes(data: bytearray, end: int) -> int:
    """How many double quotes data[:end] holds."""
    return int(np.count_nonzero(np.frombuffer(data, np.uint8, end) == ord('"')))


def _first_record_end(data: bytearray, start: int, limit: int) -> int:
    """Just after the first newline outside quotes from `start` (the header's end)."""
    position = data.find(b"\n", start, limit)
    while position >= 0 and data.count(b'"', start, position) % 2:
        position = data.find(b"\n", position + 1, limit)
    return position + 1 if position >= 0 else limit


def _read_into(stream, target: memoryview) -> int:
    """Fill target as far as the stream allows (a compressed stream may return short reads)."""
    total = 0
    while total < len(target):
        got = stream.readinto(target[total:])
        if not got:
            break
        total += got
    return total


def _text_sample(path: Path, kind: str, label: str) -> str:
    """The file's first bytes as text; file-level faults are raised here."""
    if kind == "gzip":
        try:
            with gzip.open(path, "rb") as handle:
                raw = handle.read(SNIFF_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise BillingFileError(label, "is a truncated or corrupt gzip file") from exc
    else:
        with path.open("rb") as handle:
            raw = handle.read(SNIFF_BYTES)
    encoding = _wide_encoding(raw)
    if encoding:
        raise BillingFileError(
            label,
            f"is {encoding} text; costsite reads CSV in UTF-8 only: save or export it as UTF-8 "
            "(Excel: CSV UTF-8; iconv -f UTF-16 -t UTF-8)",
        )
    if b"\x00" in raw:
        raise BillingFileError(label, "is a binary file, not CSV or Parquet")
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        text = decoder.decode(raw, final=False)
    except UnicodeDecodeError as exc:
        raise BillingFileError(
            label, f"is not UTF-8 text (byte {exc.start + 1} cannot be decoded)"
        ) from exc
    if not text.strip():
        raise BillingFileError(label, "is empty" if kind != "gzip" else "is empty once unzipped")
    return text


# Byte-order marks of the encodings whose text is full of NUL bytes (longest first).
WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32 (little-endian)"),
    (codecs.BOM_UTF32_BE, "UTF-32 (big-endian)"),
    (codecs.BOM_UTF16_LE, "UTF-16 (little-endian)"),
    (codecs.BOM_UTF16_BE, "UTF-16 (big-endian)"),
)


def _wide_encoding(raw: bytes) -> str:
    """The name of the UTF-16 or UTF-32 encoding the bytes are in, or '' when they are not:
    told by the byte-order mark, or without one by the NUL byte of every other byte of text."""
    for bom, name in WIDE_BOMS:
        if raw.startswith(bom):
            return name
    sample = raw[:4096]
    if len(sample) < 4:
        return ""
    even, odd = sample[0::2], sample[1::2]
    for zeros, other, name in (
        (odd, even, "UTF-16 (little-endian"),
        (even, odd, "UTF-16 (big-endian"),
    ):
        if zeros.count(0) > 0.9 * len(zeros) and other.count(0) < 0.1 * len(other):
            return f"{name}, without a byte-order mark)"
    return ""


def _header_record(text: str, label: str) -> tuple[list[str], str]:
    """The first CSV record (a quoted header name may hold a line break) and what ends it."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (csv.Error, StopIteration) as exc:
        raise BillingFileError(label, "has no readable header row") from exc
    # Where the record ended: the reader has consumed up to the line end.
    consumed = _record_end(text)
    ending = text[consumed - 2 : consumed] if consumed >= 2 else text[:consumed]
    return header, ending


def _record_end(text: str) -> int:
    """Just after the first line end outside quotes (\n, \r\n or a bare \r)."""
    quoted = False
    for position, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "\r\n":
            if char == "\r" and text[position + 1 : position + 2] == "\n":
                return position + 2
            return position + 1
    return len(text)


def source_inspect(path: str | Path) -> SourceFile:
    """Open a file far enough to know what it is and read its header."""
    path = Path(path)
    label = path.name
    if not path.is_file():
        raise BillingFileError(label, "does not exist or is not a file")
    size = path.stat().st_size
    if size == 0:
        raise BillingFileError(label, "is empty")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic == PARQUET_MAGIC:
        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise BillingFileError(label, PARQUET_UNREADABLE) from exc
        return SourceFile(
            path,
            "parquet",
            list(parquet.schema_arrow.names),
            size,
            parquet_rows=parquet.metadata.num_rows,
        )
    kind = "gzip" if magic[:2] == GZIP_MAGIC else "csv"
    text = _text_sample(path, kind, label)
    if text.lstrip()[:1] in ("{", "["):
        shape = json_pages.sniff(path, kind == "gzip")
        if shape is not None:
            try:
                names = json_pages.header(path, kind == "gzip", shape)
            except (ValueError, json_pages.ijson.JSONError) as exc:
                raise BillingFileError(label, f"is not a readable page of JSON: {exc}") from exc
            if not names:
                raise BillingFileError(label, "is a page of JSON without rows")
            return SourceFile(path, "json", names, size, gzipped=kind == "gzip", json_shape=shape)
    first_line = text.split("\n", 1)[0]
    if first_line.lstrip().startswith("{"):
        # Newline-delimited JSON: the first record's (flattened) fields are the header.
        try:
            record = json.loads(first_line)
        except json.JSONDecodeError as exc:
            raise BillingFileError(label, f"row 1 is not a JSON object ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise BillingFileError(label, "row 1 is not a JSON object")
        header = list(_flatten(record, set()))
        return SourceFile(path, "ndjson", header, size, gzipped=kind == "gzip")
    header, ending = _header_record(text, label)
    if ending.endswith("\r") and len(text) > len(ending):
        # Classic Mac line ends: every record would read as part of the header's line.
        raise BillingFileError(
            label,
            "ends its lines with a bare carriage return (CR, old Mac style); costsite reads CSV "
            "lines ending in LF or CRLF: save it with those",
        )
    duplicates = sorted({name for name in header if header.count(name) > 1 and name})
    if duplicates:
        raise BillingFileError(label, f"has duplicate columns: {', '.join(duplicates)}")
    return SourceFile(path, kind, header, size)
