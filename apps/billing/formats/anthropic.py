"""Anthropic's Admin API reports, saved as JSON pages: the cost report and the messages usage
report (legacy endpoints `/v1/organizations/cost_report` and `/usage_report/messages`).

- Cost report: daily buckets (`starting_at`, `ending_at`, RFC 3339); `amount` is a decimal
  **string in cents** (`"123.45"` is $1.2345), `currency` `USD`. Grouped by description, a
  result names its `model` and `token_type` (`uncached_input_tokens`, `output_tokens`,
  `cache_read_input_tokens`, `cache_creation.ephemeral_5m_input_tokens`, `…_1h_…`).
- Messages usage: tokens only, by model; `uncached_input_tokens`, `cache_read_input_tokens`,
  `cache_creation.ephemeral_5m_input_tokens`, `cache_creation.ephemeral_1h_input_tokens` and
  `output_tokens` are disjoint (unlike OpenAI's), each a line priced from the catalogue.
The account is `anthropic`; the key or workspace billed is `api_key_id`, else `workspace_id`
(null is the default workspace).
"""

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from ..model_api import CACHED, INPUT, OTHER, OUTPUT, UNKNOWN, WRITE
from . import api_common as api
from .base import BillingFormat, ColumnMap
from .openai import ApiColumnMap

TOKEN_TYPES = {
    "uncached_input_tokens": INPUT,
    "output_tokens": OUTPUT,
    "cache_read_input_tokens": CACHED,
    "cache_creation.ephemeral_5m_input_tokens": WRITE,
    "cache_creation.ephemeral_1h_input_tokens": WRITE,
}
CENTS = Decimal(100)


def _times(batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
    return api.text(batch, "bucket.starting_at"), api.text(batch, "bucket.ending_at")


def _billed_to(batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
    workspace = api.text(batch, "workspace_id")
    return pc.coalesce(api.text(batch, "api_key_id"), workspace), workspace


class AnthropicCostFormat(BillingFormat):
    name = "anthropic_cost"
    label = "Anthropic cost report"

    def detect(self, header: list[str]) -> bool:
        names = set(header)
        return {"amount", "currency", "bucket.starting_at"} <= names

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {
            "ChargePeriodStart": "bucket.starting_at",
            "ChargePeriodEnd": "bucket.ending_at",
            "BilledCost": "amount",
            "EffectiveCost": "amount",
            "BillingCurrency": "currency",
        }
        optional = ["workspace_id", "api_key_id", "description", "model", "token_type"]
        return ApiColumnMap(focus=focus, extra=[n for n in optional if n in header])

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        length = batch.num_rows
        start, end = _times(batch)
        token_type = api.text(batch, "token_type")
        encoded = pc.dictionary_encode(token_type)
        directions = [TOKEN_TYPES.get(v or "", OTHER) for v in encoded.dictionary.to_pylist()]
        direction = pc.fill_null(pc.take(pa.array(directions, pa.string()), encoded.indices), OTHER)
        resource, workspace = _billed_to(batch)
        return api.lines(
            length,
            start=start,
            end=end,
            cost=api.decimals(api.text(batch, "amount"), "amount", scale=CENTS),
            currency=pc.utf8_upper(api.text(batch, "currency")),
            account=api.constant("anthropic", length),
            provider=api.constant("Anthropic", length),
            service=api.constant("Claude API", length),
            resource=resource,
            sub_account=workspace,
            model=pc.fill_null(api.text(batch, "model"), UNKNOWN),
            direction=direction,
            tokens=pa.nulls(length, api.COUNT),
            requests=pa.nulls(length, api.COUNT),
            description=pc.coalesce(api.text(batch, "description"), token_type),
        )


USAGE_COUNTS = (
    ("uncached_input_tokens", INPUT),
    ("cache_read_input_tokens", CACHED),
    ("cache_creation.ephemeral_5m_input_tokens", WRITE),
    ("cache_creation.ephemeral_1h_input_tokens", WRITE),
    ("output_tokens", OUTPUT),
)


class AnthropicUsageFormat(BillingFormat):
    name = "anthropic_usage"
    label = "Anthropic messages usage report"

    def detect(self, header: list[str]) -> bool:
        return {"uncached_input_tokens", "output_tokens", "bucket.starting_at"} <= set(header)

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {"ChargePeriodStart": "bucket.starting_at", "ChargePeriodEnd": "bucket.ending_at"}
        optional = ["workspace_id", "api_key_id", "model", "service_tier"]
        counts = [name for name, _ in USAGE_COUNTS]
        return ApiColumnMap(focus=focus, extra=[n for n in [*optional, *counts] if n in header])

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        length = batch.num_rows
        start, end = _times(batch)
        zero = api.zero()
        model = pc.fill_null(api.text(batch, "model"), UNKNOWN)
        resource, workspace = _billed_to(batch)
        parts, amounts = [], []
        for name, direction in USAGE_COUNTS:
            tokens = pc.fill_null(api.integers(api.text(batch, name), name), zero)
            amounts.append(tokens)
            parts.append(
                api.lines(
                    length,
                    start=start,
                    end=end,
                    cost=api.priced(
                        "anthropic", model, direction, tokens, columns.unpriced, columns.prices
                    ),
                    currency=api.constant("USD", length),
                    account=api.constant("anthropic", length),
                    provider=api.constant("Anthropic", length),
                    service=api.constant("Claude API", length),
                    resource=resource,
                    sub_account=workspace,
                    model=model,
                    direction=api.constant(direction, length),
                    tokens=tokens,
                    requests=pa.nulls(length, api.COUNT),
                    description=api.constant(name, length),
                )
            )
        for item in sorted(columns.unpriced):
            api.add_note(
                columns.notes, f"no catalogue price for {item}: its tokens are counted at $0"
            )
        return api.explode(parts, pc.greater(pa.concat_arrays(amounts), zero))
