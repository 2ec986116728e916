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
  deployments, models) or of a registered resource: names, teams and who may see what come out
  of the same SQL.

On PostgreSQL the version has a second part: a sequence that every statement writing the cost
rollups moves (a trigger, migration spend 0001), so that a write no port announces (a script, a
bulk update) still makes the next request compute afresh. A sequence moves at once, before the
writer commits, which is why the announced changes move the counter as well: a figure computed
from the old rows in between is keyed by a version nobody reads once the counter's move commits.
The counter's row stays locked from the bump to the commit, so two changing transactions bump
one after the other; the ports announce at the end of their work, so the wait is short.

The same row holds two more parts, read with it in the one query: `joined`, moved with the
counter by those saves and deletes and by the `ownership_changed` port only (`joined_bump`;
the parts of a page that show neither spend nor findings, a project's runs, models and
deployments, are keyed by it alone), and `findings`, moved by every change
of findings or their hours (`findings_version_bump`, called by the insights app: a recompute, a
status change). The findings figures (apps/insights/figures.py), which read the findings tables
only, are keyed by those two, so a change of spend leaves them cached (but not a change of who
owns what: a claim, a rule or a registration moves `joined` too, and its re-attribution the
findings after it) and a change of findings leaves the spend figures cached. The pages' parts
cached as HTML are keyed by what they show (`cached_fragment`): spend by the data version, a
findings section by the findings' and the joined ones, a part with both by the data version
and the findings' version.

A fourth part, `gpu`, moves with the counter on a GPU metrics import (the port's reason), a host
mapping saved or deleted and a GPU edited or deleted (`gpu_version_bump`). The runs' and
deployments' GPU-hours read the GPU metrics and the registrations alone: they are keyed by it
and `joined` (`cached_by(..., gpu=True)`), so a new bill or a re-attribution leaves them cached.

The versions are read once per request (the first cached query reads them, the rest of the
request reuses them: one query, and one consistent set of figures). Outside a request (a task, a
command, a digest being built) nothing is cached: the figures are computed, as before, since a
task asks each question once.
"""

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import tzinfo
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import EmptyResultSet
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, connection
from django.db.models import F, Max, QuerySet
from django.utils import timezone

from apps.deployments.models import TrafficHour

from .models import SpendDataVersion

# Long enough to outlive a working day's browsing; a change makes the entries unreachable anyway.
TIMEOUT_SECONDS = 6 * 3600
PREFIX = "spend-figures"

TABLE = SpendDataVersion._meta.db_table

_request = threading.local()

T = TypeVar("T")


class Versions(NamedTuple):
    """The versions a request keys its cached figures and parts by, read in one query."""

    data: str  # the counter and the rollups' write sequence: every spend figure
    joined: int  # names, teams, who sees what (moved with the counter)
    findings: int  # findings and their hours (the insights app moves it)
    gpu: int  # GPU metrics, GPUs and host mappings (moved with the counter)


def versions_read() -> Versions:
    """The current versions (0 before the first change); within a request, the ones its first
    cached figure read."""
    if getattr(_request, "active", False):
        if getattr(_request, "versions", None) is None:
            _request.versions = _versions_query()
        return _request.versions
    return _versions_query()


def _versions_query() -> Versions:
    if connection.vendor != "postgresql":
        row = SpendDataVersion.objects.filter(pk=1).values_list(
            "value", "joined", "findings", "gpu"
        )
        value, joined, findings, gpu = row.first() or (0, 0, 0, 0)
        # No trigger here (SQLite, the demo): traffic is recorded with no port announcing it
        # (the API, a pull, a request log), and the pages show requests and the cost of 1,000;
        # its latest write is the part of the data version the trigger is on PostgreSQL.
        traffic = TrafficHour.objects.aggregate(latest=Max("updated_at"))["latest"]
        return Versions(f"{value}.{traffic.isoformat() if traffic else 0}", joined, findings, gpu)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT version.value, version.joined, version.findings, version.gpu,"
            " writes.last_value"
            f" FROM spend_rollup_writes AS writes LEFT JOIN {connection.ops.quote_name(TABLE)}"
            " AS version ON version.id = 1"
        )
        value, joined, findings, gpu, writes = cursor.fetchone()
    return Versions(f"{value or 0}.{writes}", joined or 0, findings or 0, gpu or 0)


def _bump(*parts: str) -> None:
    """Move `parts` of the version row on, in the current transaction (others see it at its
    commit, with the change; at once outside a transaction)."""
    moved = {part: F(part) + 1 for part in parts}
    if not SpendDataVersion.objects.filter(pk=1).update(**moved):
        _, created = SpendDataVersion.objects.get_or_create(pk=1, defaults=dict.fromkeys(parts, 1))
        if not created:  # another transaction made the row first
            SpendDataVersion.objects.filter(pk=1).update(**moved)
    # A request that bumps (a claim posted) reads the new versions for the rest of it.
    _request.versions = None


def version_bump(*, reason: str = "", **_announced) -> None:
    """Move to a new data version: a change of spend data or of who used what; a GPU metrics
    import (the port's `reason`) moves the GPU version with it.

    Takes and ignores any other keyword arguments, so it registers as is with both ports and
    with the model signals."""
    if reason == "gpu_import":
        _bump("value", "gpu")
    else:
        _bump("value")


def gpu_version_bump(**_announced) -> None:
    """A change of what the runs' and deployments' GPU-hours read besides their registrations (a
    host mapped to a resource, a GPU's host or label edited, a GPU deleted): those and every
    spend figure are computed afresh. Takes and ignores keyword arguments (model signals)."""
    _bump("value", "gpu")


def joined_bump(**_announced) -> None:
    """A save or delete of what the cached queries join (a name, a team, who may see a
    project), or of what the pages' parts without spend show (a run, a model, a deployment, a
    registered resource): every figure, spend and findings, is computed afresh.

    Takes and ignores any keyword arguments, as version_bump does."""
    _bump("value", "joined")


def findings_version_bump() -> None:
    """A change of findings or their hours (a recompute, a status change): the findings figures
    and the pages' parts that show them are computed afresh; the spend figures stay."""
    _bump("findings")


def _request_started(**_) -> None:
    _request.active, _request.versions = True, None


def _request_finished(**_) -> None:
    _request.active, _request.versions = False, None


request_started.connect(_request_started, dispatch_uid="spend-figures-request-started")
request_finished.connect(_request_finished, dispatch_uid="spend-figures-request-finished")


def _key(tag: str, query: QuerySet | list[QuerySet], version: str) -> str:
    queries = query if isinstance(query, list) else [query]
    return _compiled_key(tag, [part.query.sql_with_params() for part in queries], version)


def _compiled_key(tag: str, compiled: list[tuple[str, tuple]], version: str) -> str:
    digest = hashlib.sha256(f"{tag}\x00{compiled!r}".encode()).hexdigest()
    return f"{PREFIX}:{version}:{digest}"


def cached(
    tag: str,
    query: QuerySet | list[QuerySet],
    compute: Callable[[], object],
    *,
    findings: bool = False,
    compiled: tuple[str, tuple] | None = None,
) -> object:
    """`compute()`'s result for `query` (what it runs: a query, or the parts of one statement),
    from the cache when the data version is the one it was computed under. `tag` names what
    `compute` makes of the query's rows, so two computations over one query never share an
    entry. With `findings` (a query of the findings tables, and of the projects and teams it
    filters by), keyed by the findings' version and the joined one instead. `compiled` is the
    query's SQL and parameters where the caller has compiled it to run it: it is not compiled
    again for the key."""
    if not getattr(_request, "active", False):
        return compute()
    versions = versions_read()
    version = f"findings-{versions.findings}.{versions.joined}" if findings else versions.data
    try:
        key = _compiled_key(tag, [compiled], version) if compiled else _key(tag, query, version)
    except EmptyResultSet:
        # A filter that matches nothing (`__in=[]`) compiles to no SQL: nothing to read or key.
        return compute()
    return _boxed(key, compute)


def cached_by(
    tag: str,
    parts: tuple,
    compute: Callable[[], object],
    *,
    findings: bool = False,
    gpu: bool = False,
    joined: bool = False,
) -> object:
    """`compute()`'s result keyed by `parts` instead of a query's SQL: for a figure made of
    several queries whose inputs are known before any is built (its arguments, what the person
    asking sees), so that a hit builds none of them. `parts` must name everything the result
    depends on besides the versions (`repr` makes the key); with `findings`, as `cached`'s.
    With `gpu` (a figure of the GPU metrics and the registrations alone: GPU-hours), keyed by
    the GPU version and the joined one: a new bill or a re-attribution leaves it. With `joined`
    (what the joined tables alone hold: names, teams), keyed by the joined version alone."""
    if not getattr(_request, "active", False):
        return compute()
    versions = versions_read()
    if findings:
        version = f"findings-{versions.findings}.{versions.joined}"
    elif gpu:
        version = f"gpu-{versions.gpu}.{versions.joined}"
    elif joined:
        version = f"joined-{versions.joined}"
    else:
        version = versions.data
    digest = hashlib.sha256(f"{tag}\x00{parts!r}".encode()).hexdigest()
    return _boxed(f"{PREFIX}:{version}:by:{digest}", compute)


def _boxed(key: str, compute: Callable[[], object]) -> object:
    found = cache.get(key)
    if found is not None:
        return found[0]
    value = compute()
    # Boxed, so that a figure that is None (no spend yet) is a hit too.
    cache.set(key, (value,), TIMEOUT_SECONDS)
    return value


def cached_fragment(
    parts: dict[str, object],
    render: Callable[[], object],
    *,
    spend: bool = True,
    findings: bool = True,
) -> object:
    """A rendered part of a page (its HTML), cached like the figures it shows: under the data
    version, the findings' version and `parts`, which name everything else the HTML depends on
    (the URL with its query, the day, the time zone, who sees what: apps.insights.figures.
    page_fragment builds them). A hit skips the figures and the template both. A part that
    shows spend and no findings is keyed by the data version alone (a recompute leaves it), one
    that shows findings and no spend by the findings' version and the joined one (an import
    leaves it), and one that shows neither (a project's runs, models and deployments) by the
    joined version alone."""
    if not getattr(_request, "active", False):
        return render()
    versions = versions_read()
    if spend:
        version = versions.data
        if findings:
            parts = {**parts, "findings": versions.findings}
    elif findings:
        version = f"findings-{versions.findings}.{versions.joined}"
    else:
        version = f"joined-{versions.joined}"
    digest = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()
    key = f"{PREFIX}:{version}:html:{digest}"
    found = cache.get(key)
    if found is not None:
        return found
    html = render()
    cache.set(key, html, TIMEOUT_SECONDS)
    return html


def cached_rows(query: QuerySet, *, outer: str = "") -> list[dict]:
    """The rows of `query` (a values() query over the rollups), from the cache when they can be.

    The query is compiled once: the SQL its entry is keyed by is the SQL run on a miss, as
    Django's values() would run it (its row dicts, its converters: SQLite's decimals). Compiling
    a grouped query for the key and again to run it was a tenth of a cold page's time.

    With `outer` (SQL: a select list, then `FROM parts` and what follows), the rows of that
    statement over the query's rows instead, its columns in the query's order and named by them:
    a grouping of the parts of a `UNION ALL` that the ORM cannot express."""
    compiler = query.query.get_compiler(using=query.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:
        return []  # a filter that matches nothing (`__in=[]`): no SQL, no rows
    if outer:
        sql = outer.replace("FROM parts", f"FROM ({sql}) AS parts")
    if not getattr(_request, "active", False):
        return _values(query, compiler, sql, params)
    key = _compiled_key("rows", [(sql, params)], versions_read().data)
    found = cache.get(key)
    if found is not None:
        return found[0]
    value = _values(query, compiler, sql, params)
    cache.set(key, (value,), TIMEOUT_SECONDS)
    return value


def _values(query: QuerySet, compiler, sql: str, params) -> list[dict]:
    """What values() gives for `query`, from running `sql` (its compiled SQL, or a statement
    around it with the same columns)."""
    with compiler.connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if compiler.has_extra_select:  # columns selected to order by, which values() leaves out
        rows = [row[: compiler.col_count] for row in rows]
    inner = query.query
    names = inner.selected or [*inner.extra_select, *inner.values_select, *inner.annotation_select]
    return [
        {name: row[index] for index, name in enumerate(names)}
        for row in compiler.results_iter(results=[rows])
    ]


# -- A figure computed on a second connection while the request goes on ------------------------

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def in_background(compute: Callable[[], T]) -> Callable[[], T]:
    """Start `compute()` (a figure: queries and what is made of their rows) and return what
    gives its result.

    On PostgreSQL, in a request outside a transaction, it runs in this process's figures thread,
    on that thread's own connection, while the request builds its other figures: a cold page's
    heaviest statements then run on a second core instead of one after the other. The
    thread keys its figures by the request's versions (one consistent set, as before), works in
    the request's time zone (the organisation's, set per thread), keeps its connection as the
    settings say (`CONN_MAX_AGE`) and runs one figure at a time. A figure it has not begun when
    its result is asked for is taken back and computed by the caller, which would otherwise
    wait: a page asks for its figures in the reverse order of their start, so that the thread
    finishes the first while the request computes the last. Elsewhere (SQLite; a
    transaction: a test's, whose rows another connection cannot see; a task or command;
    `SPEND_FIGURE_THREADS` 0; connections not kept, `CONN_MAX_AGE` 0; the figures thread
    itself) it computes at once, here, in the order the caller asks. What `compute` raises is
    raised where its result is asked for."""
    if not _concurrent():
        value = compute()
        return lambda: value
    # What the request set for its own thread: its versions and the organisation's time zone.
    state = _State(versions_read(), timezone.get_current_timezone())
    future = _executor().submit(_in_worker, compute, state)

    def result() -> T:
        # Not started yet (the thread is still on an earlier figure): computed here instead,
        # rather than waited for.
        if future.cancel():
            return compute()
        return future.result()

    return result


class _State(NamedTuple):
    versions: Versions
    zone: tzinfo


def _concurrent() -> bool:
    return (
        settings.SPEND_FIGURE_THREADS > 0
        and getattr(_request, "active", False)
        # A figure that starts another on the figures thread would wait on itself there.
        and not getattr(_request, "in_worker", False)
        and connection.vendor == "postgresql"
        and not connection.in_atomic_block
        # Without persistent connections the thread would open one for each figure, which
        # costs more than it saves (bench/figure_threads.py: 1.03-1.28x the time without).
        and connection.settings_dict["CONN_MAX_AGE"] != 0
    )


def _executor() -> ThreadPoolExecutor:
    # Made in the process that uses it: a thread does not survive the fork of a server's worker.
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(
                max_workers=settings.SPEND_FIGURE_THREADS, thread_name_prefix="spend-figures"
            )
            _pool_pid = os.getpid()
        return _pool


def _in_worker(compute: Callable[[], T], state: _State) -> T:
    # As a request does: a connection that broke or outlived CONN_MAX_AGE is closed first and
    # a new one opened; after, closed if it must not be kept.
    close_old_connections()
    _request.active, _request.versions, _request.in_worker = True, state.versions, True
    timezone.activate(state.zone)
    try:
        return compute()
    finally:
        _request.active, _request.versions, _request.in_worker = False, None, False
        timezone.deactivate()
        close_old_connections()
