"""Bad input: each fault gets a message that names the file (and the row and column where there
is one), and nothing of the failed run stays behind: no line items, no rollup rows, no
deliveries, the data already loaded untouched."""

import gzip
import json

import pytest

from apps.billing import loader
from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost, Delivery, ImportRun

from .conftest import COLUMNS, focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture
def already_loaded(acme, tmp_path):
    """A good delivery of another account, loaded before the bad file comes."""
    run = run_import(
        write_focus(
            tmp_path / "good.csv",
            [
                focus_line(
                    BillingAccountId="999999999999",
                    Tags='{"project": "vision"}',
                    ResourceId="i-good",
                    EffectiveCost="3.25",
                    BilledCost="3.50",
                ),
            ],
        )
    )
    assert run.status == "succeeded"
    return snapshot()


def snapshot() -> tuple:
    return (
        sorted(CostLineItem.objects.values_list("id", "effective_cost", "project_id")),
        sorted(DailyCost.objects.values_list("id", "day", "effective_cost", "billed_cost")),
        sorted(DailyResourceCost.objects.values_list("id", "resource_id", "effective_cost")),
        sorted(Delivery.objects.values_list("id", "status", "fingerprint")),
    )


def assert_failed_and_nothing_changed(run, message: str, before: tuple) -> None:
    assert run.status == ImportRun.Status.FAILED
    assert run.error == message
    assert run.results[0]["status"] == "failed"
    assert run.results[0]["error"] == message
    assert (run.line_items, run.effective_cost, run.billed_cost) == (0, {}, {})
    assert snapshot() == before


def many_lines(count: int, **bad_at_25) -> list[dict]:
    lines = [
        focus_line(Tags='{"project": "vision"}', ResourceId=f"i-{n}", EffectiveCost="1.00")
        for n in range(count)
    ]
    lines[23].update(bad_at_25)  # the 24th line is row 25: the header is row 1
    return lines


def test_a_failure_at_row_25_leaves_nothing_of_the_rows_already_loaded(
    already_loaded, tmp_path, settings, monkeypatch
):
    settings.BILLING_IMPORT_BATCH_ROWS = 2  # a few rows per batch: rows 2-24 are loaded first
    written = []
    original = loader.CopyLineSink.write
    monkeypatch.setattr(
        loader.CopyLineSink,
        "write",
        lambda self, lines: (written.append(lines.num_rows), original(self, lines))[1],
    )
    path = write_focus(tmp_path / "bad.csv", many_lines(30, BilledCost="12,50"))

    run = run_import(path)

    assert sum(written) >= 20  # those rows did reach the database before the bad one
    assert_failed_and_nothing_changed(
        run, "bad.csv: row 25, column BilledCost: '12,50' is not a decimal number", already_loaded
    )
    assert run.results[0]["rows"] == sum(written)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"EffectiveCost": "$1.00"},
            "row 25, column EffectiveCost: '$1.00' is not a decimal number",
        ),
        (
            {"ChargePeriodStart": "2025-13-01T00:00:00Z"},
            "row 25, column ChargePeriodStart: '2025-13-01T00:00:00Z' is not a date and time such "
            "as 2025-01-31T00:00:00Z",
        ),
        (
            {"ChargePeriodEnd": "yesterday"},
            "row 25, column ChargePeriodEnd: 'yesterday' is not a date and time such as "
            "2025-01-31T00:00:00Z",
        ),
        (
            {"Tags": '{"project": "vision"'},
            """row 25, column Tags: '{"project": "vision"' is not a JSON object (Expecting ','"""
            " delimiter at character 21)",
        ),
        (
            {"Tags": '["vision"]'},
            """row 25, column Tags: '["vision"]' is not a JSON object of keys and values""",
        ),
        (
            {"SkuPriceDetails": "{GpuCount: 8}"},
            "row 25, column SkuPriceDetails: '{GpuCount: 8}' is not a JSON object (Expecting "
            "property name enclosed in double quotes at character 2)",
        ),
        (
            {"ChargeCategory": "Usages"},
            "row 25, column ChargeCategory: 'Usages' is not one of Usage, Purchase, Tax, Credit, "
            "Adjustment",
        ),
        (
            {"BillingAccountId": "NULL"},
            "row 25, column BillingAccountId: empty, but a value is required",
        ),
        (
            {"BillingCurrency": "  "},
            "row 25, column BillingCurrency: empty, but a value is required",
        ),
        (
            {"RegionId": "r" * 101},
            f"row 25, column RegionId: '{'r' * 79}…' is not text of at most 100 characters",
        ),
    ],
)
def test_a_bad_value_names_its_row_column_and_value(already_loaded, tmp_path, bad, message):
    run = run_import(write_focus(tmp_path / "bad.csv", many_lines(30, **bad)))

    assert_failed_and_nothing_changed(run, f"bad.csv: {message}", already_loaded)


def test_a_missing_mandatory_column_is_named(already_loaded, tmp_path):
    columns = [c for c in COLUMNS if c != "BilledCost"]
    lines = [{k: v for k, v in focus_line().items() if k != "BilledCost"}]

    run = run_import(write_focus(tmp_path / "bad.csv", lines, columns=columns))

    assert_failed_and_nothing_changed(
        run, "bad.csv: missing mandatory FOCUS column BilledCost", already_loaded
    )


def test_a_row_with_too_few_fields_is_named(already_loaded, tmp_path):
    path = write_focus(tmp_path / "bad.csv", [focus_line(), focus_line()])
    with path.open("a") as handle:
        handle.write("111111111111,Acme,USD\n")

    run = run_import(path)

    assert_failed_and_nothing_changed(
        run,
        f"bad.csv: row 4 has 3 fields where the header has {len(COLUMNS)}: '111111111111,Acme,USD'",
        already_loaded,
    )


@pytest.mark.parametrize("lines", [1, 3000])  # a short file fails at once, a long one later
def test_a_truncated_gzip_is_named(already_loaded, tmp_path, lines):
    whole = write_focus(tmp_path / "whole.csv.gz", [focus_line()] * lines, compress=True)
    data = whole.read_bytes()
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(data[: len(data) - 40])

    run = run_import(path)

    assert_failed_and_nothing_changed(
        run, "bad.csv.gz: is a truncated or corrupt gzip file", already_loaded
    )


def test_a_gzip_file_loads_like_the_csv_inside(acme, tmp_path):
    path = write_focus(
        tmp_path / "ok.csv.gz", [focus_line(EffectiveCost="2.50")] * 3, compress=True
    )

    run = run_import(path)

    assert (run.status, run.effective_cost) == ("succeeded", {"USD": "7.50"})


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", b"", "empty.csv: is empty"),
        ("blank.csv", b"\n\n  \n", "blank.csv: is empty"),
        ("empty.csv.gz", gzip.compress(b""), "empty.csv.gz: is empty once unzipped"),
        ("binary.csv", bytes(range(256)) * 64, "binary.csv: is a binary file, not CSV or Parquet"),
        (
            "latin1.csv",
            "BilledCost,Prix\n1,\xe9t\xe9\n".encode("latin-1"),
            "latin1.csv: is not UTF-8 text (byte 19 cannot be decoded)",
        ),
        ("header.csv", (",".join(COLUMNS) + "\n").encode(), "header.csv: has a header but no rows"),
        (
            "other.csv",
            b"date,amount\n2025-01-01,3\n",
            "other.csv: is not a billing export costsite knows: a FOCUS file has columns such as "
            "ChargePeriodStart, BilledCost, EffectiveCost",
        ),
        (
            "fake.parquet",
            b"PAR1 but not really",
            "fake.parquet: is not a readable Parquet file (truncated, corrupt or not Parquet)",
        ),
    ],
)
def test_a_file_level_fault_names_the_file_and_what_is_wrong(
    already_loaded, tmp_path, name, content, message
):
    path = tmp_path / name
    path.write_bytes(content)

    run = run_import(path)

    assert_failed_and_nothing_changed(run, message, already_loaded)


def test_a_missing_file_is_named(already_loaded, tmp_path):
    run = run_import(tmp_path / "nowhere.csv")

    assert_failed_and_nothing_changed(
        run, "nowhere.csv: does not exist or is not a file", already_loaded
    )


def test_one_bad_file_fails_the_whole_run_and_says_which(already_loaded, tmp_path):
    good = write_focus(tmp_path / "fine.csv", [focus_line(EffectiveCost="1.00")])
    bad = write_focus(tmp_path / "bad.csv", many_lines(30, BilledCost="x"))

    run = run_import(good, bad)

    assert run.status == ImportRun.Status.FAILED
    assert [(r["file"].rsplit("/", 1)[-1], r["status"], r["error"]) for r in run.results] == [
        ("fine.csv", "failed", "Not loaded: the import failed on bad.csv."),
        ("bad.csv", "failed", "bad.csv: row 25, column BilledCost: 'x' is not a decimal number"),
    ]
    assert snapshot() == already_loaded


def test_unknown_columns_are_ignored_and_the_provider_columns_costsite_reads_kept(acme, tmp_path):
    columns = [*COLUMNS, "Id", "x_Operation", "x_ServiceCode"]
    path = write_focus(
        tmp_path / "extra.csv",
        [
            focus_line(
                Id="row-1",
                x_Operation='Run"Instances',
                x_UsageType="BoxUsage:m6i.xlarge",
                x_ServiceCode="AmazonEC2",
            ),
        ],
        columns=columns,
    )

    run = run_import(path)

    assert run.status == "succeeded"
    assert CostLineItem.objects.get().extra == {
        "x_UsageType": "BoxUsage:m6i.xlarge",
        "x_Operation": 'Run"Instances',
    }
    assert json.dumps(CostLineItem.objects.get().tags) == "{}"
