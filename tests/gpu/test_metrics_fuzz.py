"""Property: every GPU metrics importer, given a malformed file, ends with a failed import that
names the file and where in it; never a crash, never a partial import (GPUs and GPU-hours are
counted before and after). About 200 generated files per importer (the `ci` profile)."""

import pytest
from hypothesis import given

from ..fuzz import cases, describe, metrics_importers, metrics_outcome

IMPORTERS = {importer.name: importer for importer in metrics_importers()}


@pytest.mark.parametrize("name", sorted(IMPORTERS))
def test_a_malformed_metrics_file_fails_cleanly(organization, tmp_path, name):
    importer = IMPORTERS[name]

    @given(case=cases(importer, tmp_path))
    def check(case):
        result = metrics_outcome(case)
        assert result.clean, f"{result.why}: {result.message!r} for {describe(case)}"

    check()
