"""CSV exports of the attribution pages' tables, safe to open in a spreadsheet.

A text cell that a spreadsheet would run as a formula is written with a leading apostrophe, the
spreadsheets' own "this is text" mark (OWASP, CSV injection; the rule is costsite/spreadsheet.py's).
Numbers are written as plain numbers so they stay numbers: amounts with all their decimals,
without a currency sign.
"""

import csv
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal

from django.http import HttpResponseBadRequest, StreamingHttpResponse

from costsite.spreadsheet import neutralised


def safe_cell(value) -> str | int | float:
    """One value as a CSV cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Decimal):
        return number_text(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    # Formula starts, blanks before them, fullwidth forms: costsite/spreadsheet.py's rule.
    return neutralised(str(value))


def number_text(amount: Decimal) -> str:
    """All the decimals that matter, none more: 8760.00, 0.000000352, -12.50."""
    normalised = amount.normalize()
    if normalised.as_tuple().exponent > -2:
        normalised = amount.quantize(Decimal("0.01"))
    return format(normalised, "f")


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_response(
    *, filename: str, header: list[str], rows: Iterable[Iterable]
) -> StreamingHttpResponse:
    """A streamed download: a big table never sits in memory as one string."""
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(header)
        for row in rows:
            yield writer.writerow([safe_cell(value) for value in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def range_refused(errors: list[str]) -> HttpResponseBadRequest:
    """An export of a refused date range: 400 and why, never a file of another range."""
    return HttpResponseBadRequest(
        "The date range was refused: " + " ".join(errors) + "\n",
        content_type="text/plain; charset=utf-8",
    )
