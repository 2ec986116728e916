"""The one rule every CSV export applies to its text cells (OWASP, CSV injection)."""

import pytest

from costsite.spreadsheet import neutralised


@pytest.mark.parametrize(
    "text",
    [
        "=SUM(A1:A9)",
        "+1 555 0100",
        "-2+3",
        "@SUM(A1)",
        "\tindent",
        "\r=1",
        "\ntext",
        " =cmd|' /C calc'!A0",
        "   +1",
        '\n=HYPERLINK("http://x")',
        " \n\t-1+1",
        "|cmd",
        " |cmd",
        ";list",
        " ;list",
        "\u00a0=1",  # a no-break space
        "\u200b=1",  # a zero-width space
        "\ufeff@x",  # a byte order mark
        "＝1+1",  # fullwidth equals
        "＋1",
        "－1",
        "＠SUM(A1)",
        " ＝1",
        "﹦1",  # small equals: NFKC reads it as "="
        "-",
        "=",
    ],
)
def test_text_a_spreadsheet_would_run_gets_an_apostrophe(text):
    assert neutralised(text) == "'" + text


@pytest.mark.parametrize(
    "text",
    [
        "-12.50",
        "-1000000",
        "+3",
        "0.000000352",
        "1e-7",
        "-.5",
        "i-0abc",
        "bucket=logs",
        "a;b",
        "x|y",
        "",
        " ",
        "Image ranking",
        "日本語",
    ],
)
def test_numbers_and_harmless_text_are_left_as_they_are(text):
    assert neutralised(text) == text
