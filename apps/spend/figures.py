"""Spend figures cached per data version: the rollup queries' rows, never stale.

A page's expensive figures are the rows of its grouped queries over the rollups. They are cached
under a key made of the data version and the query's SQL with its parameters, so the same
question asked again after nothing changed is answered from the cache, and any change that can
move a figure bumps the version: the next request computes afresh under the new key (the old
entries are simply never read again and expire).

What bumps it (`version_bump`, an UPDATE in the changing transaction itself, so that the new
version becomes visible with the new data, at the commit, and never before it):

- the `spend_data_changed` port (billing after a delivery is loaded or replaced and after a
  re-attribution, gpu after a GPU metrics import);
- the `ownership_changed` port (a claim, a registration with resources, an allocation rule, a
  project: who used what changed, and the re-attribution it starts bumps again when it moves
  lines);
- a save or delete of what the cached queries join (projects, teams, memberships, runs,
  deployments, models): names, teams and who may see what come out of the same SQL.

On PostgreSQL the version has a second part: a sequence that every statement writing the cost
rollups moves (a trigger, migration spend 0001), so that a write no port announces (a script, a
bulk update) still makes the next request compute afresh. A sequence moves at once, before the
writer commits, which is why the announced changes move the counter as well: a figure computed
from the old rows in between is keyed by a version nobody reads once the counter's move commits.
The counter's row stays locked from the bump to the commit, so two changing transactions bump
one after the other; the ports announce at the end of their work, so the wait is short.

The version is read once per request (the first cached query reads it, the rest of the request
reuses it: one query, and one consistent set of figures). Outside a request (a task, a command,
a digest being built) nothing is cached: the figures are computed, as before, since a task asks
each question once.
"""

import hashlib
import threading
from collections.abc import Callable

from django.core.cache import cache
from django.core.exceptions import EmptyResultSet
from django.core.signals import request_finished, request_started
from django.db import connection
from django.db.models import F, QuerySet

from .models import SpendDataVersion

# Long enough to outlive a working day's browsing; a change makes the entries unreachable anyway.
TIMEOUT_SECONDS = 6 * 3600
PREFIX = "spend-figures"

TABLE = SpendDataVersion._meta.db_table

_request = threading.local()


def version_read() -> str:
    """The current data version (0 before the first change); within a request, the one its first
    cached figure read."""
    if getattr(_request, "active", False):
        if getattr(_request, "version", None) is None:
            _request.version = _version_query()
        return _request.version
    return _version_query()


def _version_query() -> str:
    if connection.vendor != "postgresql":
        value = SpendDataVersion.objects.filter(pk=1).values_list("value", flat=True).first()
        return str(value or 0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT value FROM {connection.ops.quote_name(TABLE)} WHERE id = 1), "
            "(SELECT last_value FROM spend_rollup_writes)"
        )
        counter, writes = cursor.fetchone()
    return f"{counter or 0}.{writes}"


def version_bump(**_announced) -> None:
    """Move to a new data version, in the current transaction: others see it when it commits,
    with the change (at once outside a transaction).

    Takes and ignores any keyword arguments, so it registers as is with both ports and with the
    model signals."""
    if not SpendDataVersion.objects.filter(pk=1).update(value=F("value") + 1):
        SpendDataVersion.objects.get_or_create(pk=1, defaults={"value": 1})
    # A request that bumps (a claim posted) reads the new version for the rest of it.
    _request.version = None


def _request_started(**_) -> None:
    _request.active, _request.version = True, None


def _request_finished(**_) -> None:
    _request.active, _request.version = False, None


request_started.connect(_request_started, dispatch_uid="spend-figures-request-started")
request_finished.connect(_request_finished, dispatch_uid="spend-figures-request-finished")


def _key(tag: str, query: QuerySet) -> str:
    sql, params = query.query.sql_with_params()
    digest = hashlib.sha256(f"{tag}\x00{sql}\x00{params!r}".encode()).hexdigest()
    return f"{PREFIX}:{version_read()}:{digest}"


def cached(tag: str, query: QuerySet, compute: Callable[[], object]) -> object:
    """`compute()`'s result for `query` (what it runs), from the cache when the data version is
    the one it was computed under. `tag` names what `compute` makes of the query's rows, so two
    computations over one query never share an entry."""
    if not getattr(_request, "active", False):
        return compute()
    try:
        key = _key(tag, query)
    except EmptyResultSet:
        # A filter that matches nothing (`__in=[]`) compiles to no SQL: nothing to read or key.
        return compute()
    found = cache.get(key)
    if found is not None:
        return found[0]
    value = compute()
    # Boxed, so that a figure that is None (no spend yet) is a hit too.
    cache.set(key, (value,), TIMEOUT_SECONDS)
    return value


def cached_fragment(parts: dict[str, object], render: Callable[[], object]) -> object:
    """A rendered part of a page (its HTML), cached like the figures it shows: under the data
    version and `parts`, which name everything else the HTML depends on (the URL with its query,
    the day, the time zone, who sees what, the findings version: apps.insights.figures.
    page_fragment builds them). A hit skips the figures and the template both."""
    if not getattr(_request, "active", False):
        return render()
    digest = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()
    key = f"{PREFIX}:{version_read()}:html:{digest}"
    found = cache.get(key)
    if found is not None:
        return found
    html = render()
    cache.set(key, html, TIMEOUT_SECONDS)
    return html


def cached_rows(query: QuerySet) -> list:
    """The rows of `query` (a values() query over the rollups), from the cache when they can be."""
    return cached("rows", query, lambda: list(query))
