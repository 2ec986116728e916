"""The claim guard decides by matching whether a pattern would claim every resource."""

import re
import time

import pytest

from apps.billing.services_attribution import pattern_regex
from costsite.patterns import glob_matches, glob_parts, matches_every_id, probes


def everything(pattern: str) -> bool:
    return matches_every_id(pattern, part_regex=pattern_regex)


@pytest.mark.parametrize(
    "pattern",
    ["*", "**", "?*", "*?", "*?*", "*[!x]*", "*[!!]*", "*[!a]**", "***?***"],
)
def test_a_pattern_that_matches_every_id_is_caught_however_it_is_spelled(pattern):
    assert everything(pattern) is True


@pytest.mark.parametrize(
    "pattern",
    [
        "arn:aws:s3:::vision-*",
        "I-*",
        "?",
        "??*",  # misses the one-character ids
        "*a*",
        "[!a]*",  # misses the ARNs
        "[!!]*",  # misses the ids that start with "!"
        "*[!x]",  # misses ids that end in x
        "*-*",
        "i-0123456789abcdef0",
    ],
)
def test_a_pattern_that_misses_some_id_is_a_choice(pattern):
    assert everything(pattern) is False


@pytest.mark.parametrize("pattern", ["I-*", "*[!x]", "arn:*:s3:*", "[a-c]?*", "*é*", "?-*"])
def test_matching_agrees_with_the_rules_regular_expression(pattern):
    regex = re.compile(pattern_regex(pattern), re.IGNORECASE | re.DOTALL)
    for probe in probes():
        assert glob_matches(pattern, probe, part_regex=pattern_regex) == bool(regex.match(probe))


def test_parts_follow_the_rules_grammar():
    assert glob_parts("a*[!x]?[]y]") == ["a", "*", "[!x]", "?", "[]y]"]
    assert glob_parts("[x") == ["[", "x"]


def test_a_pattern_built_to_backtrack_is_decided_at_once():
    started = time.perf_counter()
    assert everything("*a*a*a*a*a*a*a*a*a*a*a*a*b") is False
    assert time.perf_counter() - started < 1.0
