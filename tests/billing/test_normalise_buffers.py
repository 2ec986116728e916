"""The normaliser's quick looks at a text column's buffers, which decide whether the slower,
exact search runs: they may say "look closer" for nothing (a null's slot), never "nothing
here" wrongly."""

import pyarrow as pa
import pytest

from apps.billing.normalise import OVERFLOWING, _may_hold_nul, _may_overflow
from apps.billing.reader import _quotes

CLEAN = ["32.7726000000", "0.5", None, "", "-1.25"]


def test_a_nul_byte_anywhere_is_seen_and_clean_text_is_left_alone():
    assert _may_hold_nul(pa.array(["a", "b\x00c", None]))
    assert not _may_hold_nul(pa.array(["a", "bc", None, ""]))
    assert not _may_hold_nul(pa.array([None, None], pa.string()))
    assert not _may_hold_nul(pa.array([], pa.string()))
    assert _may_hold_nul(pa.chunked_array([["a"], ["\x00"]]))


def test_a_slice_looks_only_at_its_own_values():
    parent = pa.array(["fine", "bad\x00", "fine too"])
    assert not _may_hold_nul(parent.slice(2))
    assert not _may_hold_nul(parent.slice(0, 1))
    assert _may_hold_nul(parent.slice(1, 1))


def test_a_nul_after_empty_or_null_chunks_is_still_seen():
    assert _may_hold_nul(pa.chunked_array([pa.array([None], pa.string()), pa.array(["\x00"])]))
    assert _may_hold_nul(pa.chunked_array([[""], ["a\x00"]]))


@pytest.mark.parametrize(
    "value",
    ["1e30", "1E+23", "0.5e25", "1" * 24, "-" + "9" * 24 + ".5", "  " + "1" * 24],
)
def test_every_text_the_pattern_matches_is_let_through_to_it(value):
    array = pa.array([*CLEAN, value])
    assert pa.compute.any(pa.compute.match_substring_regex(array, OVERFLOWING)).as_py()
    assert _may_overflow(array)


def test_ordinary_costs_skip_the_pattern():
    assert not _may_overflow(pa.array(CLEAN))
    assert not _may_overflow(pa.array(["9" * 23, "0." + "1" * 21]))  # 23 characters
    assert not _may_overflow(pa.array([None, None], pa.string()))
    assert not _may_overflow(pa.array(["", ""]))
    assert not _may_overflow(pa.chunked_array([CLEAN, ["1.5"]]))


def test_a_slice_is_judged_by_its_own_values():
    parent = pa.array(["1e30", "1.5", "2.5", "1" * 24])
    assert not _may_overflow(parent.slice(1, 2))  # neither the e before it nor the digits after
    assert _may_overflow(parent.slice(0, 2))
    assert _may_overflow(parent.slice(2))


def test_a_match_after_empty_or_null_chunks_is_still_let_through():
    assert _may_overflow(pa.chunked_array([pa.array([None], pa.string()), pa.array(["1e30"])]))
    assert _may_overflow(pa.chunked_array([[""], ["1e30"]]))
    assert _may_overflow(pa.chunked_array([CLEAN, ["1" * 24]]))


def test_large_text_is_read_with_its_wide_offsets():
    assert _may_overflow(pa.array(["1.5", "1e30"], pa.large_string()))
    assert _may_overflow(pa.array(["1" * 24], pa.large_string()).slice(0))
    assert not _may_overflow(pa.array(CLEAN, pa.large_string()))
    assert _may_hold_nul(pa.array(["a", "x\x00"], pa.large_string()).slice(1))
    assert not _may_hold_nul(pa.array(["x\x00", "a"], pa.large_string()).slice(1))


def test_quotes_are_counted_up_to_the_end_given():
    data = bytearray(b'a,"b ""c""",d\n"e",f\n')
    assert _quotes(data, len(data)) == 8
    assert _quotes(data, data.index(b"\n")) == 6
    assert _quotes(data, 0) == 0
