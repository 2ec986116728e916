"""One way to show each kind of figure, everywhere: money, percentages, bytes."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

register = template.Library()

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


def _decimal(value) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _symbol(currency: str) -> str:
    return SYMBOLS.get(currency, f"{currency} ")


@register.filter
def money(value, currency: str = "USD") -> str:
    """$1,234.56; negative as -$1,234.56; nothing as an en dash."""
    amount = _decimal(value)
    if amount is None:
        return "–"
    rounded = amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    sign = "-" if rounded < 0 else ""
    return f"{sign}{_symbol(currency)}{abs(rounded):,.2f}"


@register.filter
def money_short(value, currency: str = "USD") -> str:
    """$12.3k, $4.5M: for axes and tight tables."""
    amount = _decimal(value)
    if amount is None:
        return "–"
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    for limit, suffix in ((Decimal(10**9), "B"), (Decimal(10**6), "M"), (Decimal(10**3), "k")):
        if amount >= limit:
            return f"{sign}{_symbol(currency)}{amount / limit:,.1f}{suffix}"
    return f"{sign}{_symbol(currency)}{amount:,.0f}"


@register.filter
def percent(value, places: int = 0) -> str:
    """A share given as a fraction (0.183) shown as 18%."""
    share = _decimal(value)
    if share is None:
        return "–"
    return f"{share * 100:.{int(places)}f}%"


@register.filter(name="bytes")
def bytes_(value) -> str:
    size = _decimal(value)
    if size is None:
        return "–"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(size) < 1000 or unit == "TB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{size:,.1f} PB"
