"""How a GPU joins the bill, for one GPU or many owners at once: the billed resource a GPU's host
maps to (`gpu_resolutions`: a label on its series, else a HostMapping, else a resource id
registered on an experiment or a deployment that names the host), and the GPU-hours of many runs
and deployments in one query (`gpu_hours_by_owner`, what the spend pages' lists read).
apps/gpu/selectors.py re-exports both; the rules are in its docstring.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.db.models import F, Q, QuerySet, Value

from apps.deployments.models import DeploymentResource
from apps.experiments.models import ExperimentResource
from apps.projects.models import tail_of

from .models import Gpu, GpuHour, HostMapping


@dataclass(frozen=True)
class Resolution:
    resource_id: str
    via: str  # "label", "mapping" or "registered"


def gpu_resolutions(*, gpus: Iterable[Gpu] | None = None) -> dict[int, Resolution]:
    """GPU id -> the billed resource id its host maps to, and by which rule. Unmapped GPUs are
    absent. A MIG instance resolves as its physical GPU."""
    rows = (
        [(gpu.pk, gpu.host, gpu.resource_label) for gpu in gpus]
        if gpus is not None
        else list(Gpu.objects.values_list("pk", "host", "resource_label"))
    )
    mappings = HostMapping.objects.all()
    experiment_ids = ExperimentResource.objects.all()
    deployment_ids = DeploymentResource.objects.all()
    if gpus is not None:
        # A few GPUs (a page of the fleet's table, one GPU's page): only the mappings of their
        # hosts and the registered ids that could name one (the host itself, or an ARN ending
        # in it), not every registration of the organisation, by the stored tail's index: a
        # `LIKE '%host%'` per host took 14-19 ms for a page of 50 over 2,000 registrations, one
        # regular expression of them 45-68, the tail cut in the query 4-6.
        hosts = {host for _, host, label in rows if host and not label}
        mappings = mappings.filter(host__in=hosts)
        experiment_ids = registrations_naming(experiment_ids, hosts)
        deployment_ids = registrations_naming(deployment_ids, hosts)
    mappings = dict(mappings.values_list("host", "resource_id"))
    registered = _registered(experiment_ids, deployment_ids)
    resolved = {}
    for pk, host, label in rows:
        if label:
            resolved[pk] = Resolution(label, "label")
        elif host in mappings:
            resolved[pk] = Resolution(mappings[host], "mapping")
        elif host and host in registered:
            resolved[pk] = Resolution(registered[host], "registered")
    return resolved


def _registered(experiment_ids: QuerySet, deployment_ids: QuerySet) -> dict[str, str]:
    """The registered resource ids (of runs and deployments), and their tails (stored:
    ResourceUse.tail), that a host may be named by -> the resource id. A host that is itself a
    registered id resolves to that id, even when a longer id ending in it is registered too (an
    instance registered as `i-0abc` and as its ARN); a tail that several ids end in resolves to
    the smallest of them in sorted (code point) order, whatever the order the database reads
    them in."""
    pairs = sorted(
        set(experiment_ids.values_list("resource_id", "tail"))
        | set(deployment_ids.values_list("resource_id", "tail"))
    )
    registered = {resource_id: resource_id for resource_id, _ in pairs}
    for resource_id, tail in pairs:
        registered.setdefault(tail, resource_id)
    return registered


def host_resolved() -> Q:
    """A GPU whose `host` maps to a resource by a mapping or by a registered resource id, or
    its tail (the rules of gpu_resolutions after a GPU's own label), as a filter the database
    applies: the hosts page then reads only the hosts nobody has mapped."""
    registered = Q()
    for registrations in (ExperimentResource.objects, DeploymentResource.objects):
        registered |= Q(host__in=registrations.values("resource_id"))
        # The column is never NULL (its expression cannot make one of an id), but the schema
        # allows it, and one NULL would make `NOT IN` unknown for every host: none listed.
        registered |= Q(host__in=registrations.filter(tail__isnull=False).values("tail"))
    return Q(host__in=HostMapping.objects.values("host")) | (~Q(host="") & registered)


def gpus_by_resource(*, gpus: Iterable[Gpu] | None = None) -> dict[str, set[int]]:
    """Resource id (and its tail) -> the GPUs (of `gpus`, or all) that resolve to it: read with
    gpus_named_by."""
    by_resource: dict[str, set[int]] = defaultdict(set)
    for pk, resolution in gpu_resolutions(gpus=gpus).items():
        by_resource[resolution.resource_id].add(pk)
        by_resource[tail_of(resolution.resource_id)].add(pk)
    return dict(by_resource)


def gpus_named_by(by_resource: dict[str, set[int]], resource_id: str) -> set[int]:
    """The GPUs a registered or billed `resource_id` reaches in `by_resource` (gpus_by_resource):
    those of the id itself and of its tail (an ARN reaches the GPUs of its instance id)."""
    return by_resource.get(resource_id, set()) | by_resource.get(tail_of(resource_id), set())


def registrations_naming(registrations: QuerySet, ids: set[str]) -> QuerySet:
    """The registrations whose resource id, or its tail (`tail_of`, stored: ResourceUse.tail), is
    one of `ids`: two index scans, whatever the number of registrations."""
    return registrations.filter(Q(resource_id__in=ids) | Q(tail__in=ids))


# -- GPU-hours of many runs and deployments at once ---------------------------------------------


# Open ends of a window, as moments every database compares.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
USE_COLUMNS = (
    "owner_kind",
    "owner",
    "resource_id",
    "started_at",
    "ended_at",
    "owner_start",
    "owner_end",
)


def gpu_hours_by_owner(
    *,
    experiment_ids: list[int] = (),
    deployment_ids: list[int] = (),
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[tuple[str, int], float]:
    """GPU-hours measured on the resources these runs and deployments registered, in
    [start, end) (open ends: from the beginning, for ever), in four queries whatever their number
    and the GPU rollup's size.

    The rules of this module's docstring, for many owners at once (the usage selectors above read
    one owner at a time; this is what the spend pages' lists use): a GPU belongs to a
    billed resource by its series label, else its host's mapping, else a registered resource id
    naming the host; a GPU-hour counts its GPU's share (a MIG slice is a fraction) and only with
    utilisation samples; an owner's hours are those inside the registration's window (its own,
    else the owner's).
    """
    if not experiment_ids and not deployment_ids:
        return {}
    uses = list(
        ExperimentResource.objects.filter(experiment_id__in=experiment_ids)
        .annotate(
            owner_kind=Value("experiment"),
            owner=F("experiment_id"),
            owner_start=F("experiment__started_at"),
            owner_end=F("experiment__ended_at"),
        )
        .values_list(*USE_COLUMNS)
        .order_by()
        .union(
            DeploymentResource.objects.filter(deployment_id__in=deployment_ids)
            .annotate(
                owner_kind=Value("deployment"),
                owner=F("deployment_id"),
                owner_start=F("deployment__started_at"),
                owner_end=F("deployment__ended_at"),
            )
            .values_list(*USE_COLUMNS)
            .order_by(),
            all=True,
        )
    )
    if not uses:
        return {}
    keys = {rid for _, _, rid, *_ in uses} | {tail_of(rid) for _, _, rid, *_ in uses}
    gpus = list(
        Gpu.objects.filter(
            Q(resource_label__in=keys)
            | Q(host__in=keys)
            | Q(host__in=HostMapping.objects.filter(resource_id__in=keys).values("host"))
        ).values_list("pk", "host", "resource_label", "share")
    )
    mappings = dict(
        HostMapping.objects.filter(host__in={host for _, host, *_ in gpus}).values_list(
            "host", "resource_id"
        )
    )
    shares = {pk: share for pk, *_, share in gpus}
    by_key: dict[str, set[int]] = defaultdict(set)
    for pk, host, label, _ in gpus:
        if label:
            resolved = label
        elif host in mappings:
            resolved = mappings[host]
        elif host in keys:
            resolved = host
        else:
            continue
        by_key[resolved].add(pk)
        by_key[tail_of(resolved)].add(pk)
    windows = []  # (owner, gpu, start, end): one row per GPU of each registration
    owners: list[tuple[str, int]] = []
    for kind, owner, rid, started, ended, owner_start, owner_end in uses:
        gpu_ids = gpus_named_by(by_key, rid)
        if not gpu_ids:
            continue
        if (kind, owner) not in owners:
            owners.append((kind, owner))
        opens = started or owner_start
        opens = opens.replace(minute=0, second=0, microsecond=0) if opens else EARLIEST
        closes = ended or owner_end or LATEST
        windows += [(owners.index((kind, owner)), gpu, opens, closes) for gpu in sorted(gpu_ids)]
    if not windows:
        return {}
    # The windows go to the database as a table of their own, with their GPU's share, joined to
    # the GPU-hours through the (gpu, hour) index: one short range scan per GPU. (A SUM(CASE
    # ...) per owner over the rows of all their GPUs took 140 ms for the busiest project of a
    # benchmark; this, 21 ms; joining the GPUs for their share was a quarter of it.)
    adapt = connection.ops.adapt_datetimefield_value
    params = [
        value
        for index, gpu, opens, closes in windows
        for value in (index, gpu, shares[gpu], adapt(opens), adapt(closes))
    ]
    sql = f"""
        WITH windows (owner, gpu, share, start_at, end_at) AS (
            VALUES {", ".join(["(%s, %s, %s, %s, %s)"] * len(windows))}
        )
        SELECT windows.owner, SUM(windows.share)
        FROM windows
        JOIN {GpuHour._meta.db_table} hour ON hour.gpu_id = windows.gpu
            AND hour.hour >= windows.start_at AND hour.hour < windows.end_at
        WHERE hour.util_samples > 0 AND hour.hour >= %s AND hour.hour < %s
        GROUP BY windows.owner
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, adapt(start or EARLIEST), adapt(end or LATEST)])
        totals = dict(cursor.fetchall())
    return {key: float(totals.get(index) or 0.0) for index, key in enumerate(owners)}
