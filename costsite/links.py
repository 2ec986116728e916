"""Links to many objects of one kind on one page, reversed once.

The fleet page's tables link 50 GPUs and up to a few dozen projects; `{% url %}` per row spent
about 2 ms of a page's 9 ms of templates in `reverse()`. `link_to` reverses the URL once with a
marker in place of the argument and writes each link by putting the value where the marker is.
"""

import re
from collections.abc import Callable

from django.urls import NoReverseMatch, reverse

_MARKER = "918273645"  # a value both the int and the slug converters accept
# What the argument's converter accepts and reverse() writes as it is, for an int argument and
# for a slug (or str) one: anything else (quoted, or refused) is left to reverse().
_DIGITS = re.compile(r"[0-9]+\Z")
_SLUG = re.compile(r"[-A-Za-z0-9_]+\Z")


def link_to(name: str) -> Callable[[int | str], str]:
    """What gives `reverse(name, args=[value])` for many values: for a URL with one int or slug
    argument, reversed once (the script prefix included, as reverse() gives it)."""
    url = reverse(name, args=[_MARKER])
    before, found, after = url.partition(_MARKER)
    if not found or _MARKER in after:
        return lambda value: reverse(name, args=[value])
    try:
        reverse(name, args=[f"x{_MARKER}"])
        plain = _SLUG
    except NoReverseMatch:
        plain = _DIGITS

    def link(value: int | str) -> str:
        text = str(value)
        if plain.match(text) and not isinstance(value, bool):
            return f"{before}{text}{after}"
        return reverse(name, args=[value])

    return link
