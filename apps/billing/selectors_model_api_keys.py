"""Reads of the model API keys' mapping page: the keys billed that nothing maps, and the
mappings with their spend."""

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.db.models import Max, Sum
from django.db.models.functions import Lower

from .models import CostKind, DailyResourceCost, ModelApiKey


def recent_since(*, days: int) -> date | None:
    """The first of the last `days` UTC days of model API spend loaded (None: none loaded)."""
    newest = DailyResourceCost.objects.filter(cost_kind=CostKind.MODEL_API).aggregate(
        newest=Max("day")
    )["newest"]
    return None if newest is None else newest - timedelta(days=days - 1)


@dataclass(frozen=True)
class UnmappedKey:
    key: str
    sub_account_id: str
    provider_name: str
    amount: Decimal
    currency: str
    last_day: date


def unmapped_keys(*, since: date) -> list[UnmappedKey]:
    """Model API spend without a project since `since`, by key (the line's resource id) and
    sub-account, costliest first: what the mapping page offers to map."""
    rows = (
        DailyResourceCost.objects.filter(
            cost_kind=CostKind.MODEL_API, project__isnull=True, day__gte=since
        )
        .values("resource_id", "sub_account_id", "billing_currency")
        .annotate(amount=Sum("effective_cost"), provider=Max("provider_name"), last_day=Max("day"))
        .exclude(amount=0)
        .order_by("-amount", "resource_id", "sub_account_id")
    )
    return [
        UnmappedKey(
            key=row["resource_id"],
            sub_account_id=row["sub_account_id"],
            provider_name=row["provider"],
            amount=row["amount"],
            currency=row["billing_currency"],
            last_day=row["last_day"],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class MappingRow:
    mapping: ModelApiKey
    editable: bool
    amount: Decimal  # in the organisation's currency since `since`


def key_mapping_rows(*, editable_ids: set[int], since: date, currency: str) -> list[MappingRow]:
    """Every mapping, with the model API spend its key was billed since `since`."""
    mappings = list(
        ModelApiKey.objects.select_related("project", "deployment", "created_by").order_by(
            Lower("key")
        )
    )
    keys = [m.key.lower() for m in mappings]
    billed = DailyResourceCost.objects.filter(
        cost_kind=CostKind.MODEL_API, day__gte=since, billing_currency=currency
    )
    spent: dict[str, dict[str, Decimal]] = {}
    for column in ("resource_id", "sub_account_id"):
        spent[column] = {
            row["key"]: row["amount"]
            for row in billed.annotate(key=Lower(column))
            .filter(key__in=keys)
            .values("key")
            .annotate(amount=Sum("effective_cost"))
        }
    return [
        MappingRow(
            mapping=mapping,
            editable=mapping.pk in editable_ids,
            # A key is a line's resource id, else its sub-account (as attribution reads it).
            amount=spent["resource_id"].get(
                mapping.key.lower(), spent["sub_account_id"].get(mapping.key.lower(), Decimal(0))
            ),
        )
        for mapping in mappings
    ]
