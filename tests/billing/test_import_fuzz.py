"""Property: every billing importer, given a malformed file, ends with a failed run that names
the file, row and column (or the file's fault); never a crash, never a partial import. About 200
generated files per importer (the `ci` profile of tests/conftest.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ..fuzz import billing_importers, billing_outcome, cases, describe

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

IMPORTERS = {importer.name: importer for importer in billing_importers()}


@pytest.mark.parametrize("name", sorted(IMPORTERS))
def test_a_malformed_file_fails_cleanly(acme, tmp_path, name):
    importer = IMPORTERS[name]

    @given(case=cases(importer, tmp_path))
    def check(case):
        result = billing_outcome(case)
        assert result.clean, f"{result.why}: {result.message!r} for {describe(case)}"

    check()


def test_the_cases_break_files_in_every_way_listed(tmp_path):
    importer = IMPORTERS["focus"]
    seen = set()

    @given(case=cases(importer, tmp_path))
    def collect(case):
        seen.add(case.fault.split(" ")[0])

    collect()

    assert seen >= {"bad", "random-text", "field-missing", "utf-16", "truncated-gzip"}


def test_the_strategy_is_hypothesis(tmp_path):
    assert isinstance(cases(IMPORTERS["gcp"], tmp_path), st.SearchStrategy)
