"""Unused commitments on the FOCUS specification's own worked examples (FOCUS_Spec v1.2, CC BY
4.0; the copies in tests/billing/data/focus_spec_examples), imported through the real importer with
the two Mandatory columns they leave out added back (as tests/billing/test_focus_spec_examples.py).

By hand, from the files' EffectiveCost of their `CommitmentDiscountStatus = Unused` rows:
- usage scenario 1: the commitment is fully used: no finding;
- usage scenario 2: the whole hour unused: 1.00;
- usage scenario 3: 0.75 used, 0.25 unused: 0.25 (its use: used 0.75, unused 0.25);
- usage scenario 4: fully used (the rest is on-demand): no finding;
- zero percent utilisation without flexibility: the large VM's commitment unused: 1.50;
- one hundred percent utilisation (1 resource, with flexibility): no finding.
"""

import pytest

from apps.billing.models import ImportRun
from apps.insights.models import Finding, Kind
from apps.insights.services import findings_recompute
from tests.billing.conftest import SPEC_EXAMPLES, run_import
from tests.billing.test_focus_spec_examples import with_account_and_currency

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

COMMITMENT = "<my-commitment-discount-id>"
EXPECTED = {
    "commitment_discount_usage_scenario_1.csv": None,
    "commitment_discount_usage_scenario_2.csv": ("1", [["2023-01-01", "USD", "0", "1"]]),
    "commitment_discount_usage_scenario_3.csv": ("0.25", [["2023-01-01", "USD", "0.75", "0.25"]]),
    "commitment_discount_usage_scenario_4.csv": None,
    "zero_percent_utilization_without_commitment_discount_flexibility.csv": (
        "1.5",
        [["2023-01-01", "USD", "0", "1.5"]],
    ),
    "one_hundred_percent_utilization_with_commitment_discount_flexibility_with_1_resource.csv": (
        None
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unused_commitment_of_a_spec_example_equals_the_hand_computed_figure(name, tmp_path):
    run = run_import(with_account_and_currency(SPEC_EXAMPLES / name, tmp_path / name))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error

    findings_recompute()

    found = list(Finding.objects.filter(kind=Kind.UNUSED_COMMITMENT))
    if EXPECTED[name] is None:
        assert found == []
        return
    wasted, use = EXPECTED[name]
    assert [(f.subject_key, f.wasted, f.evidence["use"]) for f in found] == [
        (COMMITMENT, {"USD": wasted}, use)
    ]
