"""A filter on a column by a list of values, sent as one parameter.

`Q(experiment_id__in=ids)` makes a placeholder per value, and Django prepares each value on its
own and psycopg finds each placeholder in the SQL: a model with 227 runs put several such lists
into each of its page's queries, and building them was a third of the page's Python. On
PostgreSQL `any_of` sends the list as one array (`= ANY(%s)`, which PostgreSQL plans as it plans
an IN list); elsewhere it is the IN list.
"""

from collections.abc import Collection

from django.db.models import F, Q
from django.db.models.lookups import Lookup


class _AnyOf(Lookup):
    lookup_name = "any_of"  # used as an expression, never registered on a field
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        column, params = compiler.compile(self.lhs)
        values = list(self.rhs)
        if connection.vendor == "postgresql":
            return f"{column} = ANY(%s)", (*params, values)
        placeholders = ", ".join(["%s"] * len(values))
        return f"{column} IN ({placeholders})", (*params, *values)


def any_of(field: str, values: Collection[int]) -> Q:
    """Rows whose `field` (an integer column: a key) is one of `values` (not empty)."""
    if not values:
        raise ValueError(f"any_of({field!r}) needs at least one value")
    return Q(_AnyOf(F(field), tuple(values)))
