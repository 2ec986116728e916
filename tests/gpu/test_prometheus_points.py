"""A series' points read as columns by Arrow (prometheus._points_columns) read exactly what
decoding them point by point reads, or decline and leave them to the decoder."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from apps.gpu.formats import prometheus


def decoded(raw: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """What the decoder's path reads of the points, or None where it refuses them."""
    try:
        values = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(values, list) or not values:
        return None
    for point in values:
        if not isinstance(point, list) or len(point) != 2:
            return None
        stamp, text = point
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            return None
        if not isinstance(text, str):
            return None
    try:
        times = np.array([float(stamp) for stamp, _ in values], dtype=np.float64)
        numbers = pc.cast(pa.array([text for _, text in values], pa.string()), pa.float64())
    except (OverflowError, pa.ArrowInvalid):
        return None
    if not np.isfinite(times).all():
        return None
    return times, numbers.to_numpy()


def same(columns, expected) -> bool:
    times, values = expected
    return columns.times.view(np.int64).tolist() == times.view(
        np.int64
    ).tolist() and np.array_equal(columns.values, values, equal_nan=True)


def test_points_as_prometheus_writes_them_are_read_as_the_decoder_reads_them():
    raw = (
        b'[[1783468800,"92.5"],[1783468815.25,"NaN"],[1783468830.125,"+Inf"],'
        b'[1783468845,"-Inf"],[1783468860,"1e3"],[1783468875,"0.1"],[1783468890,"-0"]]'
    )

    columns = prometheus._points_columns(raw)

    assert columns.times.tolist() == [
        1783468800.0,
        1783468815.25,
        1783468830.125,
        1783468845.0,
        1783468860.0,
        1783468875.0,
        1783468890.0,
    ]
    assert columns.values[0] == 92.5 and math.isnan(columns.values[1])
    assert columns.values[2:].tolist() == [math.inf, -math.inf, 1000.0, 0.1, -0.0]
    assert same(columns, decoded(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b'[[1,2,"3"],["4"]]',  # three and one elements: as many fields, quotes and brackets
        b'[[1,"],[",2,"3"]]',  # a string holding the separator
        b'[[1,"2]"]]',  # a string holding a bracket
        b'[[1,"2,"]]',  # a string holding a comma
        b'[[1,2],[3,"4"]]',  # a value that is a number
        b'[["1","2"]]',  # a time that is a string
        b'[[1,"2"],[3,"4","5"]]',
        b'[[1,"2"],[3,"4","[5],6"]]',  # as many fields and brackets as three points
        b'[[1,"2"],[3,"[4,5],6"]]',
        b'[[1,"],[2"]]',
        b'[[1, "2"]]',  # written with a space
        b'[[1,"\\u0032"]]',  # an escape
        b'[[1e400,"2"]]',  # a time no double holds
        b'[[true,"2"]]',
        b'[[null,"2"]]',
        b'[[1,""]]',
        b'[[1,"lots"]]',
        b"[]",
        b"null",
    ],
)
def test_anything_else_is_left_to_the_decoder(raw):
    assert prometheus._points_columns(raw) is None


_texts = st.one_of(
    st.sampled_from(["1", "92.5", "NaN", "+Inf", "-Inf", "1e3", "", "2]", "],[", "3,", "x"]),
    st.text(alphabet='0123456789.eE+-,[]"NaInfy \\', max_size=6),
)
_elements = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    _texts,
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 9), max_size=2),
)
_numbers = st.one_of(
    st.sampled_from(["92.5", "NaN", "+Inf", "-Inf", "1e3", "-0", ".5"]),
    st.floats().map(repr),
    st.integers().map(str),
)
_point = st.tuples(st.one_of(st.integers(0, 2**40), st.floats(0, 2**40)), _numbers).map(list)
_anything = st.one_of(
    st.tuples(st.integers(0, 2**40), _texts).map(list), st.lists(_elements, max_size=3), _elements
)
# Points as Prometheus writes them, some with one point of anything else among them.
_points = st.one_of(
    st.lists(_point, min_size=1, max_size=5),
    st.tuples(st.lists(_point, max_size=3), _anything, st.lists(_point, max_size=3)).map(
        lambda parts: [*parts[0], parts[1], *parts[2]]
    ),
    st.lists(_anything, max_size=5),
)


@settings(max_examples=400, deadline=None)
@given(_points)
@example([[1, "2"], [3, "4"]])
@example([[1, 2, "3"], ["4"]])
@example([[1, "],["], [2, "3"]])
def test_the_columns_equal_the_decoder_or_decline(points):
    raw = json.dumps(points, separators=(",", ":")).encode()

    columns = prometheus._points_columns(raw)

    if columns is not None:
        expected = decoded(raw)
        assert expected is not None, raw
        assert same(columns, expected), raw
