"""The storage page's rollups (per project and day, per project and month, the whole organisation
per day, per bucket and day) are the storage rollup summed to their grains, whatever wrote it: an
import, a replacement, a re-attribution after an alias change, and the migration's backfill.
Hand-computed on the storage bill of tests/billing/conftest.py."""

import importlib
from datetime import date
from decimal import ROUND_DOWN, Decimal

import pytest
from django.db import connection
from django.db.models import F, Sum
from django.db.models.functions import TruncMonth

from apps.billing.models import (
    DailyBucketStorage,
    DailyStorageCost,
    DailyStorageSummary,
    DailyStorageTotal,
    Delivery,
    MonthlyStorageSummary,
)
from apps.billing.services import attribution_refresh
from apps.billing.storage import UsageClass
from apps.projects.models import TagKeyAlias
from apps.projects.ports import spend_data_changed

from .conftest import focus_line, run_import, storage_line, write_focus
from .test_storage import GIB, JANUARY_SECONDS

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

GRAIN = ["day", "project__slug", "data_class", "usage_class", "transfer_from", "transfer_to"]
TOTAL_GRAIN = ["day", "data_class", "usage_class", "transfer_from", "transfer_to"]
BUCKET_GRAIN = ["day", "resource_id", "project__slug", "data_class"]
SUMS = ["effective_cost", "stored_byte_seconds", "moved_bytes"]
TABLES = (DailyStorageSummary, MonthlyStorageSummary, DailyStorageTotal, DailyBucketStorage)


def summary() -> list[tuple]:
    return list(DailyStorageSummary.objects.values_list(*GRAIN, *SUMS).order_by(*GRAIN))


def grouped(rows, grain: list[str], sums: list[str] = SUMS) -> list[tuple]:
    return [
        tuple(row.values())
        for row in rows.values(*grain)
        .annotate(**{f"{name}_sum": Sum(name) for name in sums})
        .order_by(*grain)
    ]


def assert_every_summary_sums_the_storage_rollup() -> None:
    """Each of the page's rollups holds the storage rollup's sums at its own grain."""
    storage = DailyStorageCost.objects.all()
    assert summary() == grouped(storage, GRAIN)
    assert grouped(DailyStorageTotal.objects.all(), TOTAL_GRAIN) == grouped(storage, TOTAL_GRAIN)
    month_grain = ["month", *GRAIN[1:]]
    assert grouped(MonthlyStorageSummary.objects.all(), month_grain) == grouped(
        storage.annotate(month=TruncMonth("day")), month_grain
    )
    buckets = storage.filter(usage_class__in=UsageClass.STORAGE).exclude(resource_id="")
    bucket_sums = ["effective_cost", "stored_byte_seconds"]
    assert grouped(DailyBucketStorage.objects.all(), BUCKET_GRAIN, bucket_sums) == grouped(
        buckets, BUCKET_GRAIN, bucket_sums
    )


def test_an_import_sums_the_storage_rollup_to_the_pages_grain(focus_bill):
    rows = summary()
    checkpoints = (Decimal("0.516129032258065") * GIB * JANUARY_SECONDS).quantize(
        Decimal("0.000001"), ROUND_DOWN
    )
    day = rows[0][0]
    assert str(day) == "2025-01-02"
    # The checkpoint bucket's storage and its requests are one row; the model is not a key.
    assert rows == [
        (day, "nlp", "dataset", "object", "", "",
         Decimal("0.70"), Decimal(31 * 10**9 * JANUARY_SECONDS), Decimal(0)),
        (day, "vision", "checkpoints", "object", "", "",
         Decimal("0.015"), checkpoints, Decimal(0)),
        (day, None, "unclassified", "inter_region", "us-east-1", "eu-west-1",
         Decimal("0.20"), Decimal(0), Decimal(10 * GIB)),
    ]  # fmt: skip
    assert_every_summary_sums_the_storage_rollup()
    assert (
        DailyStorageSummary.objects.filter(delivery=Delivery.objects.get(status="current")).count()
        == 3
    )


def test_a_replacement_leaves_only_the_new_deliverys_rows(focus_bill, tmp_path):
    lines = [
        storage_line(
            ConsumedQuantity="1",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.023",
            BilledCost="0.023",
            Tags='{"user:project": "search", "user:data-class": "datasets"}',
        ),
        focus_line(EffectiveCost="5.00", BilledCost="5.00"),
    ]
    run = run_import(write_focus(tmp_path / "storage-again.csv", lines))
    assert run.status == "succeeded", run.error
    current = Delivery.objects.get(status="current")
    assert [(slug, data_class, spend) for _, slug, data_class, _, _, _, spend, *_ in summary()] == [
        ("search", "dataset", Decimal("0.023"))
    ]
    for model in (
        DailyStorageSummary,
        MonthlyStorageSummary,
        DailyStorageTotal,
        DailyBucketStorage,
    ):
        assert set(model.objects.values_list("delivery_id", flat=True)) == {current.pk}
    assert_every_summary_sums_the_storage_rollup()


def test_a_reattribution_after_an_alias_change_rebuilds_it(acme, tmp_path, monkeypatch):
    lines = [
        storage_line(
            ResourceId="arn:aws:s3:::ranker-artefacts",
            ConsumedQuantity="2",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.046",
            BilledCost="0.046",
            Tags='{"service": "ranker", "kind": "logs"}',
        ),
    ]
    assert run_import(write_focus(tmp_path / "owners.csv", lines)).status == "succeeded"
    assert [row[2] for row in summary()] == ["artefacts"]

    announced = []
    monkeypatch.setattr(spend_data_changed, "_handlers", list(spend_data_changed.handlers()))
    spend_data_changed.register(lambda **change: announced.append(change))
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.DATA_CLASS, key="kind")
    attribution_refresh()
    assert [(row[2], row[6]) for row in summary()] == [("logs", Decimal("0.046"))]
    # No owner moved, but the storage rollups' keys did: the pages' cached figures must go.
    assert announced == [
        {"start": date(2025, 1, 2), "end": date(2025, 1, 3), "reason": "reattribution"}
    ]
    assert_every_summary_sums_the_storage_rollup()


def test_the_migrations_backfill_gives_what_the_import_wrote(focus_bill):
    def written():
        return {
            model.__name__: sorted(
                model.objects.values_list(*[f.attname for f in model._meta.fields][1:]), key=str
            )
            for model in TABLES
        }

    before = written()
    assert all(before.values())
    for model in TABLES:
        model.objects.all().delete()
    migration = importlib.import_module("apps.billing.migrations.0014_storage_summary")
    migration.backfill(None, None)
    assert written() == before


def test_a_write_to_any_of_them_behind_the_ports_back_moves_the_data_version(focus_bill):
    """A script's bulk update is seen by the next page: the statement triggers of spend 0003 move
    the sequence that is the second part of the spend data version."""

    def writes() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT last_value FROM spend_rollup_writes")
            return cursor.fetchone()[0]

    for model in TABLES:
        before = writes()
        model.objects.update(effective_cost=F("effective_cost"))
        assert writes() > before, model.__name__
