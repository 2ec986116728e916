"""`import_billing --json` names each format it detected, and `--format` forces one."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from .cur import athena_lines, cur2_lines, cur_lines, write_cur, write_manifest, write_parquet
from .test_azure import EA_COLUMNS, ea_rows, mca_rows, write_azure
from .test_gcp import gcp_rows, write_gcp

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


def formats_printed(*args) -> list[str]:
    out = StringIO()
    call_command("import_billing", *[str(a) for a in args], "--json", stdout=out)
    return [json.loads(line)["format"] for line in out.getvalue().splitlines()]


def test_the_command_reports_each_format_by_its_name(acme, tmp_path):
    (tmp_path / "cur").mkdir()
    files = {
        "aws-cur": write_manifest(tmp_path / "cur", [cur_lines()]),
        "aws-cur-parquet": write_parquet(tmp_path / "athena.parquet", athena_lines(cur_lines())),
        "aws-cur2": write_parquet(tmp_path / "cur2.parquet", cur2_lines(cur_lines())),
        "gcp": write_gcp(tmp_path / "gcp.csv", gcp_rows()),
        "azure-ea": write_azure(tmp_path / "ea.csv", ea_rows(), columns=EA_COLUMNS),
        "azure-mca": write_azure(tmp_path / "mca.csv", mca_rows(ea_rows())),
    }
    for name, path in files.items():
        assert formats_printed(path) == [name]


def test_a_forced_format_that_does_not_fit_names_what_is_missing(acme, tmp_path):
    path = write_cur(tmp_path / "cur.csv", cur_lines())
    out = StringIO()
    with pytest.raises(CommandError, match="1 of the imported deliveries failed"):
        call_command(
            "import_billing", str(path), "--format", "gcp", "--json", stdout=out, stderr=StringIO()
        )
    line = json.loads(out.getvalue().splitlines()[0])
    assert line["format"] == "gcp"
    assert line["error"] == (
        "cur.csv: missing mandatory GCP billing export columns billing_account_id, "
        "usage_start_time, usage_end_time, currency, cost, invoice.month"
    )
