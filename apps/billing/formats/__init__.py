"""Billing file formats: one module per format, each mapping its columns onto FOCUS's.

FOCUS is the internal shape. A format module knows how to recognise its header and how to turn a
batch of its rows (every column read as text) into FOCUS-named text columns; everything after that
(validation, attribution, load, rollups) is shared. To add a format (AWS CUR, GCP, Azure), write a
module with a `BillingFormat` subclass and add it to `FORMATS` below.
"""

from .base import BillingFormat, ColumnMap
from .focus import FocusFormat

FORMATS: dict[str, BillingFormat] = {fmt.name: fmt for fmt in (FocusFormat(),)}


def format_names() -> list[str]:
    return ["auto", *FORMATS]


def format_detect(header: list[str]) -> BillingFormat | None:
    """The first format that recognises this header, or None."""
    for fmt in FORMATS.values():
        if fmt.detect(header):
            return fmt
    return None


__all__ = ["FORMATS", "BillingFormat", "ColumnMap", "format_detect", "format_names"]
