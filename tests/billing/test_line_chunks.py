"""Re-attribution and the allocation preview read lines in chunks: on PostgreSQL by COPY parsed by
Arrow, elsewhere through the ORM. Both give the same tables, chunk by chunk."""

from decimal import Decimal

import pyarrow as pa
import pytest
from django.db import connection
from django.db.models import JSONField, Q, Value

from apps.billing import reattribution
from apps.billing.models import CostLineItem, Delivery
from apps.billing.reattribution import DRY_RUN_COLUMNS, _copy_chunk, _line_chunks, _orm_chunk
from apps.billing.services import attribution_refresh
from apps.experiments.models import ExperimentResource

from .conftest import COLUMNS, focus_line, run_import, when, write_focus

pytestmark = [
    pytest.mark.django_db(databases=["default", "progress"]),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's"),
]

ODD_TAGS = [
    {"n": 1.50, "big": 10**20, "neg": [-2.5e3, 0, 7], "ok": True, "none": None},
    {"naïve": "café ☕", "quote": 'say "hi" \\ now', "ctl": "a\nb\tc\x7fd\x01"},
    {"nested": {"x": [], "y": {}, "z": ["a: 1", "b, 2"]}},
    [],
    "",
    None,
    0.0,
]


@pytest.fixture
def delivery(acme, tmp_path):
    """Lines with tags, provider columns, empty and 15-decimal amounts, odd text, and two lines
    shared by two runs (stored as two parts each)."""
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-shared")
    ExperimentResource.objects.create(experiment=acme.evaluation, resource_id="i-shared")
    lines = [
        focus_line(
            Tags='{"ml-project": "vision", "team": "a"}',
            EffectiveCost="0.000000000000001",
            BilledCost="123456789.123456789012345",
            x_UsageType="BoxUsage:p4d.24xlarge",
        ),
        focus_line(ResourceId="i-shared", EffectiveCost="3.000000000000001", BilledCost="3"),
        focus_line(
            ResourceId="i-untagged",
            ListCost="",
            ContractedCost="",
            ChargeDescription='GPU hours, "spot"\nsecond line',
        ),
        focus_line(
            ResourceId="i-shared",
            ChargePeriodStart="2025-01-03T10:00:00Z",
            ChargePeriodEnd="2025-01-03T11:00:00Z",
            EffectiveCost="-1.100000000000003",
            BilledCost="-1.1",
        ),
        focus_line(
            ResourceId="I-Mixed-Case",
            ChargePeriodStart="2025-01-20T00:00:00.5Z",
            ChargePeriodEnd="2025-01-20T01:00:00Z",
            SubAccountId="",
            Tags='{"user:project": "nlp"}',
        ),
    ]
    for at in range(len(ODD_TAGS)):
        lines.append(focus_line(ResourceId=f"i-odd-{at}", ConsumedQuantity=f"{at}.25"))
    path = write_focus(tmp_path / "january.csv", lines, columns=[*COLUMNS, "ChargeDescription"])
    assert run_import(path).status == "succeeded"
    for at, tags in enumerate(ODD_TAGS):
        as_json = Value(tags, JSONField())  # None as JSON's null, not SQL's
        CostLineItem.objects.filter(resource_id=f"i-odd-{at}").update(tags=as_json, extra=as_json)
    return Delivery.objects.get()


def both(*args, **kwargs) -> tuple[list[pa.Table], list[pa.Table]]:
    by_orm = list(_line_chunks(*args, read=_orm_chunk, **kwargs))
    by_copy = list(_line_chunks(*args, read=_copy_chunk, **kwargs))
    return by_orm, by_copy


def assert_same(by_orm: list[pa.Table], by_copy: list[pa.Table]) -> None:
    assert [t.num_rows for t in by_copy] == [t.num_rows for t in by_orm]
    for orm_table, copy_table in zip(by_orm, by_copy, strict=True):
        assert copy_table.schema == orm_table.schema
        assert copy_table.to_pylist() == orm_table.to_pylist()
        assert copy_table.equals(orm_table)


def test_postgresql_reads_by_copy():
    assert reattribution._chunk_reader() is _copy_chunk


def test_every_column_is_the_same_by_copy_and_by_the_orm(delivery):
    by_orm, by_copy = both(delivery, None, None, None)

    assert_same(by_orm, by_copy)
    table = pa.concat_tables(by_copy)
    assert table.num_rows == 14  # 12 source lines, two of them in two parts
    assert table["id"].to_pylist() == sorted(table["id"].to_pylist())
    rows = {r["resource_id"]: r for r in table.to_pylist()}
    first = rows[""]
    assert first["effective_cost"] == Decimal("0.000000000000001")
    assert first["billed_cost"] == Decimal("123456789.123456789012345")
    assert first["tags"] == '{"team": "a", "ml-project": "vision"}'  # jsonb orders keys
    assert first["extra"] == '{"x_UsageType": "BoxUsage:p4d.24xlarge"}'
    untagged = rows["i-untagged"]
    assert (untagged["tags"], untagged["list_cost"], untagged["contracted_cost"]) == (
        None,
        None,
        None,
    )
    assert untagged["charge_description"] == 'GPU hours, "spot"\nsecond line'
    assert rows["I-Mixed-Case"]["sub_account_id"] == ""
    assert rows["I-Mixed-Case"]["charge_period_start"] == when("2025-01-20T00:00:00.500000")
    assert rows["i-odd-0"]["tags"] == (
        '{"n": 1.5, "ok": true, "big": 100000000000000000000, "neg": [-2500.0, 0, 7], "none": null}'
    )
    assert rows["i-odd-1"]["tags"] == (
        '{"ctl": "a\\nb\\tc\\u007fd\\u0001", "quote": "say \\"hi\\" \\\\ now", '
        '"na\\u00efve": "caf\\u00e9 \\u2615"}'
    )
    assert [rows[f"i-odd-{at}"]["extra"] for at in range(3, 7)] == [None, None, None, None]
    shared = [r for r in table.to_pylist() if r["resource_id"] == "i-shared"]
    assert sorted(r["effective_cost"] for r in shared) == [
        Decimal("-0.880000000000002"),  # 8 GPUs to 2
        Decimal("-0.220000000000001"),
        Decimal("0.600000000000000"),
        Decimal("2.400000000000001"),
    ]


@pytest.mark.parametrize("size", [2, 3, 4, 5])
def test_a_source_rows_parts_are_never_split_across_chunks(delivery, monkeypatch, size):
    attribution_refresh()  # the shared lines' parts are written again, at the end of the ids
    delivery.refresh_from_db()
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", size)

    by_orm, by_copy = both(delivery, None, None, None)

    assert_same(by_orm, by_copy)
    seen: dict[int, int] = {}
    for at, chunk in enumerate(by_copy):
        for row in set(chunk["source_row"].to_pylist()):
            assert seen.setdefault(row, at) == at
    assert sum(t.num_rows for t in by_copy) == 14


def test_the_window_keys_narrowing_and_dry_run_columns_are_the_same(delivery, monkeypatch):
    monkeypatch.setattr(reattribution, "REFRESH_CHUNK", 2)
    start, end = when("2025-01-03T00:00:00"), when("2025-01-21T00:00:00")

    def narrow(lines):
        return lines.filter(Q(resource_id__iregex="^i-(shared|mixed)") | Q(tags={}))

    cases = [
        both(delivery, start, end, None),
        both(delivery, None, None, None, narrow=narrow, names=DRY_RUN_COLUMNS),
        both(delivery, start, end, ["i-mixed-case", "i-shared"], names=DRY_RUN_COLUMNS),
    ]

    for by_orm, by_copy in cases:
        assert_same(by_orm, by_copy)
    windowed, narrowed, keyed = (pa.concat_tables(by_copy) for _, by_copy in cases)
    assert sorted(windowed["resource_id"].to_pylist()) == ["I-Mixed-Case", "i-shared", "i-shared"]
    assert narrowed.column_names == DRY_RUN_COLUMNS
    assert narrowed.num_rows == 6  # two shared lines' parts, the mixed-case and untagged lines
    assert keyed.to_pylist() == windowed.select(DRY_RUN_COLUMNS).to_pylist()


def test_no_line_gives_no_chunk(delivery):
    assert both(delivery, when("2024-01-01T00:00:00"), when("2024-02-01T00:00:00"), None) == (
        [],
        [],
    )
