"""A re-attribution over all history sums each delivery's rollups from the lines it reads
(as an import does) instead of reading every line again to rebuild them: what it writes equals
a rebuild of the same rollups from the stored lines, to the cent, in every rollup table."""

import threading
from decimal import Decimal

import psycopg
import pytest
from django.db import OperationalError
from django.db.models import Count, DecimalField, IntegerField, Sum

from apps.billing import reattribution
from apps.billing.loader import RollupAccumulator, rollups_rebuild
from apps.billing.models import (
    CostLineItem,
    DailyBucketStorage,
    DailyCost,
    DailyModelApiCost,
    DailyProjectCost,
    DailyResourceCost,
    DailyStorageCost,
    DailyStorageSummary,
    DailyStorageTotal,
    Delivery,
    MonthlyCost,
    MonthlyStorageSummary,
)
from apps.billing.reattribution import Moves
from apps.billing.services import attribution_refresh
from apps.billing.services_allocation import tag_key_alias_preview
from apps.deployments.models import DeploymentResource
from apps.experiments.models import ExperimentResource
from apps.projects.models import TagKeyAlias

from .conftest import focus_line, run_import, storage_line, write_focus
from .formats import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

TABLES = (
    DailyCost,
    DailyResourceCost,
    DailyStorageCost,
    DailyModelApiCost,
    MonthlyCost,
    DailyProjectCost,
    DailyStorageSummary,
    MonthlyStorageSummary,
    DailyStorageTotal,
    DailyBucketStorage,
)


@pytest.fixture
def bills(acme, tmp_path):
    """Compute (one line two runs will share), storage, network and model API lines, mostly
    unattributed until the aliases and registrations below."""
    lines = [
        focus_line(Tags='{"team-project": "vision"}', EffectiveCost="6.00", BilledCost="6.00"),
        focus_line(
            ResourceId="i-late", EffectiveCost="1.000000000000001", BilledCost="1.000000000000001"
        ),
        focus_line(
            ResourceId="i-late",
            ChargePeriodStart="2025-01-25T00:00:00Z",
            ChargePeriodEnd="2025-01-25T01:00:00Z",
            EffectiveCost="2.00",
            BilledCost="2.00",
        ),
        focus_line(
            ServiceName="AWS Data Transfer",
            ServiceCategory="Networking",
            ConsumedQuantity="10",
            ConsumedUnit="GB",
            EffectiveCost="0.20",
            BilledCost="0.20",
            x_UsageType="USE1-EUW1-AWS-Out-Bytes",
            Tags='{"team-project": "nlp"}',
        ),
        storage_line(
            ConsumedQuantity="0.516129032258065",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.01",
            BilledCost="0.01",
            Tags='{"team-project": "vision", "kind": "checkpoints"}',
        ),
        storage_line(
            ResourceId="arn:aws:s3:::acme-datasets",
            ChargePeriodStart="2025-01-03T00:00:00Z",
            ChargePeriodEnd="2025-01-04T00:00:00Z",
            ConsumedQuantity="31",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.70",
            BilledCost="0.70",
            Tags='{"kind": "dataset"}',
        ),
    ]
    for path in (
        write_focus(tmp_path / "january.csv", lines),
        pages.write_litellm_csv(tmp_path / "spend.csv", pages.litellm_rows()),
    ):
        run = run_import(path)
        assert run.status == "succeeded", run.error
    return acme


def rollup_sums() -> dict:
    """Each rollup table's money, quantities and counts summed per key (a rollup may hold a
    key in several rows: only the sums are its meaning)."""
    out = {}
    for model in TABLES:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        sums = [
            f.attname
            for f in fields
            if isinstance(f, DecimalField | IntegerField) and not f.is_relation
        ]
        keys = [f.attname for f in fields if f.attname not in sums]
        rows = model.objects.values(*keys).annotate(**{f"{n}__sum": Sum(n) for n in sums})
        out[model.__name__] = sorted(
            ((tuple(row[k] for k in keys), tuple(row[f"{n}__sum"] for n in sums)) for row in rows),
            key=repr,
        )
    return out


def rebuilt_sums() -> dict:
    for delivery_id in Delivery.objects.filter(status="current").values_list("pk", flat=True):
        rollups_rebuild(delivery_id=delivery_id)
    return rollup_sums()


def move_everything(acme) -> int:
    TagKeyAlias.objects.create(dimension="project", key="Team-Project")
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.DATA_CLASS, key="kind")
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-late")
    ExperimentResource.objects.create(experiment=acme.evaluation, resource_id="i-late")
    DeploymentResource.objects.create(
        deployment=acme.ranker, resource_id=pages.litellm_rows()[0]["api_key"]
    )
    return attribution_refresh()


def test_the_rollups_a_full_run_sums_equal_a_rebuild_from_the_lines(bills):
    before = rollup_sums()

    assert move_everything(bills) == 6

    written = rollup_sums()
    assert all(written.values()), [name for name, rows in written.items() if not rows]
    assert written != before
    assert written == rebuilt_sums()
    # The shared line is stored as two parts, and the rollups count both.
    assert CostLineItem.objects.filter(delivery__format="focus", source_row=3).count() == 2
    assert DailyCost.objects.aggregate(n=Sum("line_items"))["n"] == (CostLineItem.objects.count())
    # nlp: the evaluation's fifth of the shared line, its line of the 25th, the transfer.
    assert DailyCost.objects.filter(project=bills.nlp).aggregate(s=Sum("effective_cost")) == {
        "s": Decimal("2.400000000000000")
    }


def test_sums_written_out_part_way_give_the_same_rollups(bills, monkeypatch):
    # Past FLUSH_AT merged groups the running sums are written out and started again.
    monkeypatch.setattr(RollupAccumulator, "MERGE_AT", 0)
    monkeypatch.setattr(RollupAccumulator, "FLUSH_AT", 1)
    flushes = []
    real = RollupAccumulator.flush
    monkeypatch.setattr(RollupAccumulator, "flush", lambda self: flushes.append(1) or real(self))

    move_everything(bills)

    assert len(flushes) >= 2
    assert rollup_sums() == rebuilt_sums()


def test_parts_written_again_are_not_read_again_where_the_delivery_has_no_id_range(
    bills, monkeypatch
):
    """Deliveries loaded before their line id range was kept read all the delivery's lines;
    the shared line's new parts come after the others in id order, and a later chunk on the
    same connection would meet them (and sum them twice)."""
    Delivery.objects.update(first_line_id=0, last_line_id=0)
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", 2)

    move_everything(bills)

    assert DailyCost.objects.aggregate(n=Sum("line_items"), s=Sum("effective_cost")) == (
        CostLineItem.objects.aggregate(n=Count("id"), s=Sum("effective_cost"))
    )
    assert rollup_sums() == rebuilt_sums()


def test_a_full_run_that_moves_nothing_leaves_the_rollups_as_they_were(bills):
    move_everything(bills)
    before = rollup_sums()

    assert attribution_refresh() == 0

    assert rollup_sums() == before


def costsite_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("costsite-")]


def counting_read_ahead(monkeypatch, module) -> list:
    """Each delivery whose lines another connection reads ahead, counted."""
    started = []
    real = reattribution._lines_read_ahead
    monkeypatch.setattr(
        module,
        "_lines_read_ahead",
        lambda chunks, **options: started.append(1) or real(chunks, **options),
    )
    return started


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_outside_a_transaction_it_reads_ahead_and_writes_from_a_thread_to_the_same_end(
    bills, monkeypatch
):
    """As a worker runs it: the lines are read on another connection a chunk ahead and the
    changes applied by a thread, chunks of three lines here, the shared line's parts rewritten
    among them."""
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", 3)
    started = counting_read_ahead(monkeypatch, reattribution)
    applied = []
    real = reattribution._update_from_copy
    monkeypatch.setattr(
        reattribution,
        "_update_from_copy",
        lambda cursor, changes: (
            applied.append(threading.current_thread().name) or real(cursor, changes)
        ),
    )

    assert move_everything(bills) == 6

    assert started == [1, 1]  # one per delivery: the FOCUS bill and the LiteLLM log
    assert set(applied) == {"costsite-reattribute"}
    assert CostLineItem.objects.filter(delivery__format="focus", source_row=3).count() == 2
    assert rollup_sums() == rebuilt_sums()
    assert costsite_threads() == []


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_a_lost_connection_in_the_writing_thread_is_djangos_error_and_changes_nothing(
    bills, monkeypatch
):
    """An OperationalError is what hands a run back for a retry: the thread's error is
    Django's, as the caller's own cursor would raise it."""
    before = list(CostLineItem.objects.order_by("id").values_list("id", "project_id"))
    sums = rollup_sums()
    threads = []

    def lost(cursor, changes):
        threads.append(threading.current_thread().name)
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(reattribution, "_update_from_copy", lost)
    with pytest.raises(OperationalError, match="server closed the connection unexpectedly"):
        move_everything(bills)

    assert threads == ["costsite-reattribute"]
    assert list(CostLineItem.objects.order_by("id").values_list("id", "project_id")) == before
    assert rollup_sums() == sums
    assert costsite_threads() == []


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_a_failure_while_the_next_chunk_is_read_stops_the_reading_thread(bills, monkeypatch):
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", 3)
    real = reattribution._diff
    calls = []

    def failing(lines, attributor):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a bad chunk")
        return real(lines, attributor)

    monkeypatch.setattr(reattribution, "_diff", failing)
    before = list(CostLineItem.objects.order_by("id").values_list("id", "project_id"))

    with pytest.raises(ValueError, match="a bad chunk"):
        move_everything(bills)

    assert costsite_threads() == []
    assert list(CostLineItem.objects.order_by("id").values_list("id", "project_id")) == before


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_outside_a_transaction_the_preview_reads_ahead_and_says_what_the_run_moves(
    bills, monkeypatch
):
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", 3)
    started = counting_read_ahead(monkeypatch, reattribution)

    preview = tag_key_alias_preview(alias=TagKeyAlias(dimension="project", key="Team-Project"))

    assert started == [1, 1]
    assert (preview.lines, preview.totals) == (3, {"USD": Decimal("6.21")})
    TagKeyAlias.objects.create(dimension="project", key="Team-Project")
    moves = Moves()
    assert attribution_refresh(moves=moves) == 3
    assert {
        (m["direction"], m["project_id"], m["amount"], m["lines"]) for m in moves.as_json()
    } == {
        ("from", None, "6.21", 3),
        ("to", bills.nlp.pk, "0.20", 1),
        ("to", bills.vision.pk, "6.01", 2),
    }
    assert costsite_threads() == []


def test_a_delivery_s_id_range_grows_only_to_cover_parts_written_again(bills):
    focus = Delivery.objects.get(format="focus")
    litellm = Delivery.objects.exclude(pk=focus.pk).get()
    assert focus.last_line_id <= litellm.first_line_id  # the LiteLLM log was loaded after

    move_everything(bills)

    focus.refresh_from_db()
    litellm_range = (litellm.first_line_id, litellm.last_line_id)
    litellm.refresh_from_db()
    parts = CostLineItem.objects.filter(delivery=focus, source_row=3)
    assert parts.count() == 2
    # The shared line's parts were written after the log's lines: the range covers them.
    assert all(focus.first_line_id < part.id <= focus.last_line_id for part in parts)
    # Nothing of the log's was written again: its range is as it was.
    assert (litellm.first_line_id, litellm.last_line_id) == litellm_range
