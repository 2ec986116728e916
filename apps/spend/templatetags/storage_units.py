"""Bytes as the storage page shows them: one kind of unit everywhere, binary (KiB, MiB, GiB,
TiB, PiB: powers of 1,024), whatever base a bill used (billing.storage converted it to bytes)."""

from decimal import Decimal

from django import template

register = template.Library()
UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def binary_bytes_text(value) -> str:
    if value is None:
        return "–"
    amount = Decimal(value)
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    power = 0
    while amount >= 1024 and power < len(UNITS) - 1:
        amount /= 1024
        power += 1
    if power == 0:
        return f"{sign}{amount:,.0f} B"
    return (
        f"{sign}{amount:,.1f} {UNITS[power]}"
        if amount < 100
        else f"{sign}{amount:,.0f} {UNITS[power]}"
    )


@register.filter
def binary_bytes(value) -> str:
    """`16642998272` → `15.5 GiB`."""
    return binary_bytes_text(value)
