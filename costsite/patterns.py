"""Whether a shell-style pattern of resource ids matches every resource: decided by matching it
against probe ids, not by how it is spelled (`*`, `**`, `?*`, `*?*`, `*[!x]*` all match them all).

The probes are ids of every shape a bill holds (AWS ARNs and instance ids, GCP and Azure paths)
and random strings of 1 to 200 characters drawn with a fixed seed from letters, digits,
punctuation and non-ASCII letters. A pattern that matches every probe would claim every resource;
one that misses any is a choice. (An id is never empty, so the empty string is no probe: `?*`
misses it and still claims everything.)

Matching is by dynamic programming over the pattern's parts (O(pattern × id)), not by a regular
expression: `*a*a*a*a*a*a*b` would backtrack for minutes in Python's `re` against a long probe.
Each part that stands for one character (`?`, `[abc]`, `[!x]`, a literal) is tested by the
caller's own regular expression for it, so this reads the pattern exactly as the rules do.
"""

import random
import re
import string
from collections.abc import Callable
from functools import cache

REAL_IDS = [
    "i-0123456789abcdef0",
    "arn:aws:s3:::vision-training-data",
    "arn:aws:sagemaker:us-east-1:111111111111:endpoint/ranker-prod",
    "arn:aws:ec2:eu-west-1:222222222222:volume/vol-0abc",
    "projects/vision-123/instances/a2-highgpu-8g",
    "//compute.googleapis.com/projects/p/zones/us-central1-a/instances/trainer",
    "gs://vision-sandbox",
    "/subscriptions/0000-1111/resourceGroups/ML/providers/Microsoft.Compute/virtualMachines/nc",
]
ALPHABET = string.ascii_letters + string.digits + string.punctuation + " éüßøÅ日本中文"


@cache
def probes() -> tuple[str, ...]:
    rng = random.Random(13)
    lengths = [1, 1, 1, 2, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 200]
    generated = ["".join(rng.choice(ALPHABET) for _ in range(n)) for n in lengths * 8]
    return tuple(REAL_IDS + generated)


def glob_parts(pattern: str) -> list[str]:
    """The pattern cut into `*` and one-character parts, with the rules' grammar: `[` opens a
    class when a `]` follows past its first character (`[]x]` holds `]` and `x`)."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            parts.append(pattern[i : end + 1])
            i = end + 1
        else:
            parts.append(pattern[i])
            i += 1
    return parts


def _matches(tests: list[Callable[[str], bool] | None], text: str) -> bool:
    # reach[j]: the first j parts can match the text read so far.
    reach = [True] + [False] * len(tests)
    for j, test in enumerate(tests, start=1):
        reach[j] = reach[j - 1] and test is None
    for char in text:
        new = [False] * (len(tests) + 1)
        for j, test in enumerate(tests, start=1):
            if test is None:
                new[j] = new[j - 1] or reach[j]  # a star: nothing more, or one more character
            else:
                new[j] = reach[j - 1] and test(char) is not None
        reach = new
        if not any(reach):
            return False
    return reach[-1]


def _part_tests(pattern: str, part_regex: Callable[[str], str]):
    tests: list[Callable[[str], bool] | None] = []
    for part in glob_parts(pattern):
        if part == "*":
            if tests and tests[-1] is None:
                continue
            tests.append(None)
        else:
            tests.append(re.compile(part_regex(part), re.IGNORECASE | re.DOTALL).fullmatch)
    return tests


def glob_matches(pattern: str, text: str, *, part_regex: Callable[[str], str]) -> bool:
    """Whether the pattern matches the text, case aside, as the rules' regular expression does."""
    return _matches(_part_tests(pattern, part_regex), text)


def matches_every_id(pattern: str, *, part_regex: Callable[[str], str]) -> bool:
    """Whether the pattern matches every probe id, case aside (the rules match without case).
    `part_regex` turns a one-character part into the regular expression the rules use for it.
    Raises re.error for a part the rules could not read either (`[z-a]`)."""
    tests = _part_tests(pattern, part_regex)
    return all(_matches(tests, probe) for probe in probes())
