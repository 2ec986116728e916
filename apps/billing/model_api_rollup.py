"""The model API rollup (DailyModelApiCost): spend, tokens and requests by day, owner, provider,
model and token direction, cut from the model API lines as they are loaded and rebuilt from the
lines after a re-attribution. Only model API lines are kept (a filter per batch), so a cloud
bill without any costs this one comparison per batch."""

from datetime import UTC
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from django.db.models import Count, Sum
from django.db.models.functions import Coalesce, TruncDate

from .models import CostKind, CostLineItem, DailyModelApiCost, Delivery

KEYS = [
    "delivery_id",
    "day",
    "project_id",
    "deployment_id",
    "workload",
    "provider_name",
    "resource_id",
    "model",
    "token_direction",
    "billing_currency",
]
SUMS = ["effective_cost", "billed_cost", "tokens", "requests", "line_items"]
COLUMNS = [f.column for f in DailyModelApiCost._meta.concrete_fields if f.column != "id"]
MERGE_AT = 50_000


class ModelApiRollup:
    """Running sums of the model API lines written so far, per delivery."""

    def __init__(self):
        self._parts: list[pa.Table] = []
        self._rows = 0

    def add(self, lines: pa.Table) -> None:
        from .loader import DEC, _filled, _sum

        api = lines.filter(pc.fill_null(pc.equal(lines["cost_kind"], CostKind.MODEL_API), False))
        if not api.num_rows:
            return
        zero = pa.scalar(Decimal(0), DEC)
        table = pa.table(
            {
                **_filled(api, KEYS),
                "effective_cost": api["effective_cost"],
                "billed_cost": api["billed_cost"],
                "tokens": pc.fill_null(api["tokens"], zero),
                "requests": pc.fill_null(api["requests"], zero),
                "line_items": pa.array([1] * api.num_rows, pa.int64()),
            }
        )
        self._parts.append(_sum(table, KEYS, SUMS))
        self._rows += self._parts[-1].num_rows
        if self._rows > MERGE_AT:
            self._merge()

    def _merge(self) -> None:
        from .loader import _sum

        if len(self._parts) > 1:
            self._parts = [_sum(pa.concat_tables(self._parts), KEYS, SUMS)]
        self._rows = sum(part.num_rows for part in self._parts)

    def write(self, *, delivery_ids: list[int]) -> None:
        """Insert the sums of these deliveries' model API lines."""
        from .loader import copy_table

        self._merge()
        if not self._parts:
            return
        wanted = pa.array(delivery_ids, pa.int64())
        table = self._parts[0]
        chosen = pc.is_in(table["delivery_id"], value_set=wanted)
        copy_table(DailyModelApiCost._meta.db_table, table.filter(chosen).select(COLUMNS))
        self._parts = [table.filter(pc.invert(chosen))]


def model_api_rollup_rebuild(*, delivery_id: int, start=None, end=None) -> None:
    """Recompute one delivery's model API rollup rows from its lines (for days in [start, end))."""
    from .loader import _insert_select

    lines = CostLineItem.objects.of_delivery(Delivery.objects.get(pk=delivery_id)).filter(
        cost_kind=CostKind.MODEL_API
    )
    rows = DailyModelApiCost.objects.filter(delivery_id=delivery_id)
    if start is not None:
        lines = lines.filter(charge_period_start__gte=start, charge_period_start__lt=end)
        rows = rows.filter(day__gte=start.date(), day__lt=end.date())
    rows.delete()
    zero = Decimal(0)
    _insert_select(
        DailyModelApiCost,
        lines.annotate(day=TruncDate("charge_period_start", tzinfo=UTC))
        .values(*KEYS)
        .annotate(
            effective_cost=Sum("effective_cost"),
            billed_cost=Sum("billed_cost"),
            tokens=Coalesce(Sum("tokens"), zero),
            requests=Coalesce(Sum("requests"), zero),
            line_items=Count("id"),
        )
        .order_by(),
    )
