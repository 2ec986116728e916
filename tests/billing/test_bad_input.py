"""Bad input at import, fixed as classes: every case ends as a failed run whose message names
the file, row and column (or the file's fault), and nothing of it is stored."""

import codecs
import json
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import CostLineItem, DailyCost, Delivery, ImportRun

from .conftest import focus_line, run_import, write_focus
from .formats.cur import athena_lines as cur_athena_lines
from .formats.cur import cur2_lines, cur_lines, write_cur, write_cur2_csv, write_parquet
from .formats.test_azure import ea_row, mca_rows, write_azure
from .formats.test_gcp import gcp_row, write_gcp

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

# Every test runs on 1 March 2025: the billing period window ends 62 days later (2 May 2025).
TODAY = "2025-03-01T12:00:00Z"


@pytest.fixture(autouse=True)
def _today():
    with time_machine.travel(TODAY, tick=False):
        yield


def failed(run: ImportRun) -> str:
    assert run.status == ImportRun.Status.FAILED, run.results
    assert CostLineItem.objects.count() == 0
    assert DailyCost.objects.count() == 0
    assert Delivery.objects.count() == 0
    return run.error


OUTSIDE_WINDOW = (
    "is outside the plausible window around the billing period (from 731 days before its start "
    "to 3 days after its end)"
)


# -- impossible dates, every billing format --------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
        ("2022-12-31T00:00:00Z", "2022-12-31T00:00:00Z"),
        ("2025-02-04T00:00:00Z", "2025-02-04T00:00:00Z"),
    ],
)
def test_a_focus_charge_far_from_its_billing_period_is_refused(acme, tmp_path, moment, shown):
    path = write_focus(
        tmp_path / "focus.csv",
        [focus_line(), focus_line(ChargePeriodStart=moment, ChargePeriodEnd=moment)],
    )

    assert failed(run_import(path)) == (
        f"focus.csv: row 3, column ChargePeriodStart: '{shown}' {OUTSIDE_WINDOW}"
    )


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ("1999-12-01T00:00:00Z", "1999-12-01T00:00:00Z"),
        ("2025-06-01T00:00:00Z", "2025-06-01T00:00:00Z"),
        ("9999-12-01T00:00:00Z", "9999-12-01T00:00:00Z"),
    ],
)
def test_a_billing_period_before_2000_or_months_ahead_is_refused(acme, tmp_path, moment, shown):
    path = write_focus(tmp_path / "focus.csv", [focus_line(BillingPeriodStart=moment)])

    assert failed(run_import(path)) == (
        f"focus.csv: row 2, column BillingPeriodStart: '{shown}' is outside the plausible window "
        "for a billing period's start (from 2000-01-01 to 2025-05-02, 62 days from now)"
    )


def test_a_billing_period_of_a_year_or_ending_at_its_start_is_refused(acme, tmp_path):
    long = write_focus(tmp_path / "long.csv", [focus_line(BillingPeriodEnd="2026-01-01T00:00:00Z")])
    empty = write_focus(
        tmp_path / "empty.csv", [focus_line(BillingPeriodEnd="2025-01-01T00:00:00Z")]
    )

    assert failed(run_import(long)) == (
        "long.csv: row 2, column BillingPeriodEnd: '2026-01-01T00:00:00Z' makes the billing "
        "period longer than 92 days"
    )
    assert failed(run_import(empty)) == (
        "empty.csv: row 2, column BillingPeriodEnd: '2025-01-01T00:00:00Z' is not after the "
        "billing period's start"
    )


def with_second(**line_item) -> list[dict]:
    """The CUR fixture's lines, the second one's lineItem/* columns changed."""
    lines = cur_lines()
    lines[1].update({f"lineItem/{name}": value for name, value in line_item.items()})
    return lines


def test_a_legacy_cur_line_of_year_one_is_refused(acme, tmp_path):
    path = write_cur(tmp_path / "cur.csv", with_second(UsageStartDate="0001-01-01T00:00:00Z"))

    assert failed(run_import(path)) == (
        f"cur.csv: row 3, column lineItem/UsageStartDate: '0001-01-01T00:00:00Z' {OUTSIDE_WINDOW}"
    )


def test_a_cur_parquet_line_of_year_9999_is_refused(acme, tmp_path):
    lines = cur_athena_lines(with_second(UsageEndDate="9999-12-31T00:00:00Z"))
    path = write_parquet(tmp_path / "cur.parquet", lines)

    assert failed(run_import(path)) == (
        "cur.parquet: row 3, column line_item_usage_end_date: '9999-12-31T00:00:00Z' is more "
        "than 1,127 days (a three-year term) after the billing period's end"
    )


def test_a_cur2_line_of_year_one_is_refused(acme, tmp_path):
    lines = cur2_lines(with_second(UsageStartDate="0001-01-01T00:00:00Z"))
    path = write_cur2_csv(tmp_path / "cur2.csv", lines)

    assert failed(run_import(path)) == (
        "cur2.csv: row 3, column line_item_usage_start_date: '0001-01-01T00:00:00Z' "
        f"{OUTSIDE_WINDOW}"
    )


def test_a_gcp_row_of_year_9999_is_refused(acme, tmp_path):
    path = write_gcp(
        tmp_path / "gcp.csv",
        [
            gcp_row(cost="1"),
            gcp_row(
                cost="1",
                usage_start_time="9999-01-02 10:00:00+00:00",
                usage_end_time="9999-01-02 11:00:00+00:00",
            ),
        ],
    )

    assert failed(run_import(path)) == (
        f"gcp.csv: row 3, column usage_start_time: '9999-01-02T10:00:00Z' {OUTSIDE_WINDOW}"
    )


@pytest.mark.parametrize(
    ("rows", "column"), [(lambda r: r, "Date"), (lambda r: mca_rows(r), "date")]
)
def test_an_azure_row_of_year_one_is_refused(acme, tmp_path, rows, column):
    path = write_azure(tmp_path / "azure.csv", rows([ea_row(Cost="1", Date="01/01/0001")]))

    assert failed(run_import(path)) == (
        f"azure.csv: row 2, column {column}: '0001-01-01T00:00:00Z' {OUTSIDE_WINDOW}"
    )


# -- a charge that ends before it starts; usage outside its period; corrections ---------------


def test_a_charge_that_ends_before_it_starts_is_refused(acme, tmp_path):
    path = write_focus(
        tmp_path / "focus.csv",
        [
            focus_line(
                ChargePeriodStart="2025-01-02T10:00:00Z", ChargePeriodEnd="2025-01-02T09:00:00Z"
            )
        ],
    )

    assert failed(run_import(path)) == (
        "focus.csv: row 2, column ChargePeriodEnd: '2025-01-02T09:00:00Z' is before the charge's "
        "start (ChargePeriodStart): the charge ends before it starts"
    )


def test_usage_in_another_billing_period_is_refused_unless_a_correction(acme, tmp_path):
    december = {
        "ChargePeriodStart": "2024-12-10T10:00:00Z",
        "ChargePeriodEnd": "2024-12-10T11:00:00Z",
    }
    usage = write_focus(tmp_path / "usage.csv", [focus_line(), focus_line(**december)])
    correction = write_focus(
        tmp_path / "correction.csv",
        [
            focus_line(),
            focus_line(ChargeClass="Correction", BilledCost="-2", EffectiveCost="-2", **december),
        ],
    )

    assert failed(run_import(usage)) == (
        "usage.csv: row 3, column ChargePeriodStart: '2024-12-10T10:00:00Z' is outside the "
        "billing period of this usage charge (only a correction, ChargeClass = Correction, may "
        "charge an earlier period)"
    )
    run = run_import(correction)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "-1.00"}
    assert CostLineItem.objects.count() == 2


def test_usage_a_day_either_side_of_its_period_is_kept_for_billing_time_zones(acme, tmp_path):
    path = write_focus(
        tmp_path / "focus.csv",
        [
            focus_line(
                ChargePeriodStart="2024-12-31T08:00:00Z", ChargePeriodEnd="2024-12-31T09:00:00Z"
            ),
            focus_line(
                ChargePeriodStart="2025-02-01T07:00:00Z", ChargePeriodEnd="2025-02-01T08:00:00Z"
            ),
        ],
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert CostLineItem.objects.count() == 2


def test_a_commitment_purchase_covering_its_term_is_kept(acme, tmp_path):
    path = write_focus(
        tmp_path / "focus.csv",
        [
            focus_line(
                ChargeCategory="Purchase",
                ChargeFrequency="One-Time",
                ChargePeriodStart="2025-01-01T00:00:00Z",
                ChargePeriodEnd="2028-01-01T00:00:00Z",
                BilledCost="26280",
                EffectiveCost="0",
            )
        ],
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "26280.00"}


# -- negative usage ---------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["BilledCost", "EffectiveCost"])
def test_usage_of_minus_a_million_is_refused(acme, tmp_path, column):
    path = write_focus(tmp_path / "focus.csv", [focus_line(**{column: "-1000000"})])

    assert failed(run_import(path)) == (
        f"focus.csv: row 2, column {column}: '-1000000.000000000000000' is below -100000 for a "
        "usage charge (a refund that large comes as a Credit line or a correction)"
    )


def test_credits_refunds_and_corrections_below_the_usage_floor_are_kept(acme, tmp_path):
    path = write_focus(
        tmp_path / "focus.csv",
        [
            focus_line(ChargeCategory="Credit", BilledCost="-2000000", EffectiveCost="-2000000"),
            focus_line(ChargeClass="Correction", BilledCost="-150000", EffectiveCost="-150000"),
            focus_line(BilledCost="-99999.99", EffectiveCost="-99999.99"),
        ],
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "-2249999.99"}


# -- tags ----------------------------------------------------------------------------------------


def test_a_tag_value_of_a_megabyte_is_refused(acme, tmp_path):
    tags = json.dumps({"project": "vision", "note": "x" * 1_000_000})
    path = write_focus(tmp_path / "focus.csv", [focus_line(), focus_line(Tags=tags)])

    assert failed(run_import(path)) == (
        'focus.csv: row 3, column Tags: \'{"project": "vision", "note": "'
        + "x" * 48
        + "…' has a value of 1,000,000 characters for tag 'note' (at most 1,024 are taken)"
    )


def test_a_tag_key_too_long_is_refused_and_the_limits_themselves_are_kept(acme, tmp_path):
    kept = write_focus(
        tmp_path / "kept.csv", [focus_line(Tags=json.dumps({"k" * 512: "v" * 1024}))]
    )
    refused = write_focus(tmp_path / "refused.csv", [focus_line(Tags=json.dumps({"k" * 513: "v"}))])

    assert run_import(kept).status == ImportRun.Status.SUCCEEDED
    CostLineItem.objects.all().delete()
    DailyCost.objects.all().delete()
    Delivery.objects.all().delete()
    assert failed(run_import(refused)).endswith(
        "has a tag key of 513 characters (at most 512 are taken)"
    )


# -- numbers too large for the column -------------------------------------------------------------


TOO_LARGE = (
    "is too large for the column (it holds numbers of up to 23 digits before the point and 15 "
    "after: below 10^23 in size)"
)


@pytest.mark.parametrize("value", ["1e30", "1" * 30, "-" + "9" * 24 + ".5", "1E+23", "0.5e25"])
def test_numbers_too_large_for_the_column_say_so(acme, tmp_path, value):
    path = write_focus(tmp_path / "focus.csv", [focus_line(), focus_line(ListCost=value)])

    assert failed(run_import(path)) == f"focus.csv: row 3, column ListCost: '{value}' {TOO_LARGE}"


def test_the_largest_number_the_column_holds_is_kept_exactly(acme, tmp_path):
    largest = "9" * 23 + "." + "9" * 15
    path = write_focus(
        tmp_path / "focus.csv", [focus_line(ListCost=largest, ContractedCost="1e22")]
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    line = CostLineItem.objects.get()
    assert line.list_cost == Decimal(largest)
    assert line.contracted_cost == Decimal("1e22")


def test_a_word_is_still_not_a_decimal_number(acme, tmp_path):
    path = write_focus(tmp_path / "focus.csv", [focus_line(ListCost="lots")])

    assert failed(run_import(path)) == (
        "focus.csv: row 2, column ListCost: 'lots' is not a decimal number"
    )


# -- encodings and line ends -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "bom", "named"),
    [
        ("utf-16-le", codecs.BOM_UTF16_LE, "UTF-16 (little-endian)"),
        ("utf-16-be", codecs.BOM_UTF16_BE, "UTF-16 (big-endian)"),
        ("utf-16-le", b"", "UTF-16 (little-endian, without a byte-order mark)"),
        ("utf-32-le", codecs.BOM_UTF32_LE, "UTF-32 (little-endian)"),
    ],
)
def test_utf16_and_utf32_files_say_which_encoding_they_are(acme, tmp_path, encoding, bom, named):
    text = write_focus(tmp_path / "plain.csv", [focus_line()]).read_text()
    path = tmp_path / "wide.csv"
    path.write_bytes(bom + text.encode(encoding))

    assert failed(run_import(path)) == (
        f"wide.csv: is {named} text; costsite reads CSV in UTF-8 only: save or export it as "
        "UTF-8 (Excel: CSV UTF-8; iconv -f UTF-16 -t UTF-8)"
    )


def test_a_carriage_return_inside_a_quoted_header_or_field_is_data(acme, tmp_path):
    plain = (
        write_focus(tmp_path / "plain.csv", [focus_line(ResourceName="a\rb")]).read_bytes().decode()
    )
    header, row, _ = plain.split("\r\n")
    # A first header name holding a CR (quoted, so valid CSV), and its field ending in one.
    path = tmp_path / "cr.csv"
    path.write_bytes(f'"x_Note\rmore",{header}\n"note\r",{row}\n'.encode())

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert CostLineItem.objects.get().resource_name == "a\rb"


def test_a_file_with_old_mac_line_ends_says_so(acme, tmp_path):
    text = write_focus(tmp_path / "plain.csv", [focus_line(), focus_line()]).read_bytes().decode()
    path = tmp_path / "mac.csv"
    path.write_bytes(text.replace("\r\n", "\r").encode())

    assert failed(run_import(path)) == (
        "mac.csv: ends its lines with a bare carriage return (CR, old Mac style); costsite "
        "reads CSV lines ending in LF or CRLF: save it with those"
    )


# -- Azure MCA without billing period values ----------------------------------------------------


def test_an_mca_export_with_empty_billing_periods_takes_the_month_of_each_date(acme, tmp_path):
    rows = mca_rows(
        [
            ea_row(Cost="2.00", Date="01/31/2025"),
            ea_row(Cost="3.00", Date="02/01/2025"),
        ]
    )
    for row in rows:
        row["billingPeriodStartDate"] = row["billingPeriodEndDate"] = ""
    path = write_azure(tmp_path / "mca.csv", rows)

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    note = (
        "billingPeriodStartDate and billingPeriodEndDate are empty: the billing period was "
        "taken from the charge dates (the calendar month of date)"
    )
    periods = [
        (r["billing_period_start"], r["billing_period_end"], r["billed_cost"], r["notes"])
        for r in run.results
    ]
    assert periods == [
        ("2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", {"USD": "2.00"}, [note]),
        ("2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z", {"USD": "3.00"}, [note]),
    ]


def test_an_ea_export_with_empty_billing_periods_is_still_named(acme, tmp_path):
    path = write_azure(
        tmp_path / "ea.csv",
        [ea_row(Cost="2.00", BillingPeriodStartDate="", BillingPeriodEndDate="")],
    )

    assert failed(run_import(path)) == (
        "ea.csv: row 2, column BillingPeriodStartDate: empty, but a date such as 01/31/2025 is "
        "required"
    )


# -- NUL bytes -----------------------------------------------------------------------------------


def test_a_nul_byte_past_the_files_first_bytes_is_named(acme, tmp_path):
    lines = [focus_line(ResourceName="r" * 100) for _ in range(800)]  # past the 64 KiB sniffed
    lines.append(focus_line(ResourceName="bad\x00name"))
    path = write_focus(tmp_path / "focus.csv", lines)

    assert failed(run_import(path)) == (
        "focus.csv: row 802, column ResourceName: 'bad\\\\x00name' holds a NUL byte (binary data)"
    )


def test_a_nul_in_a_parquet_text_column_is_named(acme, tmp_path):
    lines = cur_athena_lines(cur_lines()[:2])
    lines[1]["line_item_resource_id"] = "i-\x00"
    path = write_parquet(tmp_path / "cur.parquet", lines)

    assert failed(run_import(path)) == (
        "cur.parquet: row 3, column line_item_resource_id: 'i-\\\\x00' holds a NUL byte (binary "
        "data)"
    )


def test_a_json_escaped_nul_in_tags_is_named(acme, tmp_path):
    path = write_focus(tmp_path / "focus.csv", [focus_line(Tags='{"project": "a\\u0000b"}')])

    assert failed(run_import(path)) == (
        'focus.csv: row 2, column Tags: \'{"project": "a\\\\u0000b"}\' holds a NUL character '
        "(\\u0000)"
    )


def test_a_quote_left_open_at_the_end_of_the_file_names_its_row(acme, tmp_path):
    text = write_focus(tmp_path / "plain.csv", [focus_line()] * 3).read_bytes().decode()
    header, first, second, third, _ = text.split("\r\n")
    path = tmp_path / "open.csv"
    # The second row's last field opens a quote that never closes: it would swallow the third.
    path.write_bytes(f'{header}\r\n{first}\r\n{second[:-1]}"x\r\n{third}\r\n'.encode())

    assert failed(run_import(path)) == (
        'open.csv: row 3 has an unterminated quote: a quoted field opens and never closes (a " '
        "is missing or stray)"
    )


def test_a_gcp_invoice_month_whose_end_no_date_holds_is_refused(acme, tmp_path):
    path = write_gcp(tmp_path / "gcp.csv", [gcp_row(cost="1", **{"invoice.month": "999912"})])

    assert failed(run_import(path)) == (
        "gcp.csv: row 2, column invoice.month: '999912' is outside the plausible window for a "
        "billing period (from 2000-01-01)"
    )
