"""OpenAI's organisation Costs API and Usage API pages, saved as JSON (`curl … > file.json`).

Both come as pages of daily (Costs) or 1m/1h/1d (Usage) buckets, each with results
(shared/reference facts, condensed in the module docstring of api_common):
- Costs: `amount.value` is dollars as a JSON number, `amount.currency` lowercase; `line_item`
  (when grouped by it) is free text such as `gpt-4o-2024-08-06, cached input`, from which the
  model and the token direction are read (`priority | …` tiers and `, long context` tails too);
  text without a comma (`web search tool calls`) is model `unknown`, direction other.
- Usage (completions, embeddings…): tokens only. `input_tokens` *includes* the cached and the
  cache-write tokens, so a result becomes up to four lines: uncached input, cached input, cache
  write and output, each priced from the catalogue (billing's `model_prices` port); requests
  (`num_model_requests`) go on the first line only, so that they are counted once.
The account is `organization_id` where a column gives it, else `openai`; the key or project billed
is `api_key_id`, else `project_id`.
"""

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SourceValueError
from ..model_api import CACHED, INPUT, OTHER, OUTPUT, UNKNOWN, WRITE
from . import api_common as api
from .base import BillingFormat, ColumnMap

LINE_ITEM_DIRECTIONS = {
    "input": INPUT,
    "cached input": CACHED,
    "cache write": WRITE,
    "cached write": WRITE,
    "output": OUTPUT,
}


@dataclass(frozen=True)
class ApiColumnMap(ColumnMap):
    """A column map with what one file's import remembers: prices looked up, models unpriced,
    ids seen (per-request formats)."""

    prices: dict = field(default_factory=dict, compare=False)
    unpriced: set = field(default_factory=set, compare=False)
    seen: api.SeenIds = field(default_factory=api.SeenIds, compare=False)


def line_item_parse(value: str | None) -> tuple[str, str]:
    """(model, direction) of a Costs `line_item`."""
    if not value:
        return UNKNOWN, OTHER
    text = value.split("|", 1)[-1].strip() if "|" in value else value.strip()
    parts = [part.strip() for part in text.split(",")]
    if len(parts) < 2 or not parts[0]:
        return UNKNOWN, OTHER
    return parts[0], LINE_ITEM_DIRECTIONS.get(parts[1].lower(), OTHER)


def _account(batch: pa.RecordBatch) -> pa.Array:
    return pc.fill_null(api.text(batch, "organization_id"), "openai")


def _billed_to(batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
    project = api.text(batch, "project_id")
    return pc.coalesce(api.text(batch, "api_key_id"), project), project


def _period(batch: pa.RecordBatch, columns: ColumnMap) -> tuple[pa.Array, pa.Array]:
    start = api.unix_seconds(
        api.text(batch, columns.focus["ChargePeriodStart"]), columns.focus["ChargePeriodStart"]
    )
    end = api.unix_seconds(
        api.text(batch, columns.focus["ChargePeriodEnd"]), columns.focus["ChargePeriodEnd"]
    )
    return start, end


class OpenAiCostsFormat(BillingFormat):
    name = "openai_costs"
    label = "OpenAI Costs API"

    def detect(self, header: list[str]) -> bool:
        return {"amount.value", "amount.currency", "bucket.start_time"} <= set(header)

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {
            "ChargePeriodStart": "bucket.start_time",
            "ChargePeriodEnd": "bucket.end_time",
            "BilledCost": "amount.value",
            "EffectiveCost": "amount.value",
            "BillingCurrency": "amount.currency",
        }
        optional = ["line_item", "project_id", "api_key_id", "organization_id", "quantity"]
        extra = [name for name in [*optional, "quantity_unit"] if name in header]
        return ApiColumnMap(focus=focus, extra=extra, version="costs")

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        length = batch.num_rows
        start, end = _period(batch, columns)
        line_item = api.text(batch, "line_item")
        encoded = pc.dictionary_encode(line_item)
        parsed = [line_item_parse(value) for value in encoded.dictionary.to_pylist()]
        model = pc.take(pa.array([p[0] for p in parsed], pa.string()), encoded.indices)
        direction = pc.take(pa.array([p[1] for p in parsed], pa.string()), encoded.indices)
        model = pc.fill_null(model, UNKNOWN)
        direction = pc.fill_null(direction, OTHER)
        unit = pc.utf8_lower(pc.fill_null(api.text(batch, "quantity_unit"), ""))
        quantity = api.integers(api.text(batch, "quantity"), "quantity")
        tokens = pc.if_else(pc.match_substring(unit, "token"), quantity, pa.scalar(None, api.COUNT))
        resource, project = _billed_to(batch)
        return api.lines(
            length,
            start=start,
            end=end,
            cost=api.text(batch, "amount.value"),
            currency=pc.utf8_upper(api.text(batch, "amount.currency")),
            account=_account(batch),
            provider=api.constant("OpenAI", length),
            service=api.constant("OpenAI API", length),
            resource=resource,
            sub_account=project,
            model=model,
            direction=direction,
            tokens=tokens,
            requests=pa.nulls(length, api.COUNT),
            description=line_item,
        )


USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "input_cached_tokens",
    "input_cache_write_tokens",
    "num_model_requests",
)


class OpenAiUsageFormat(BillingFormat):
    name = "openai_usage"
    label = "OpenAI Usage API"

    def detect(self, header: list[str]) -> bool:
        names = set(header)
        return (
            {"input_tokens", "bucket.start_time"} <= names
            and "amount.value" not in names
            and "uncached_input_tokens" not in names
        )

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {"ChargePeriodStart": "bucket.start_time", "ChargePeriodEnd": "bucket.end_time"}
        optional = ["model", "project_id", "api_key_id", "organization_id", "batch"]
        extra = [name for name in [*optional, *USAGE_COUNTS] if name in header]
        return ApiColumnMap(focus=focus, extra=extra, version="usage")

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        length = batch.num_rows
        start, end = _period(batch, columns)
        counts = {name: api.integers(api.text(batch, name), name) for name in USAGE_COUNTS}
        zero = api.zero()
        cached = pc.fill_null(counts["input_cached_tokens"], zero)
        write = pc.fill_null(counts["input_cache_write_tokens"], zero)
        uncached = pc.cast(
            pc.subtract(pc.subtract(pc.fill_null(counts["input_tokens"], zero), cached), write),
            api.COUNT,
        )
        if pc.any(pc.less(uncached, zero)).as_py():
            index = pc.index(pc.less(uncached, zero), True).as_py()
            raise SourceValueError(
                index,
                "input_cached_tokens",
                batch.column(batch.schema.names.index("input_cached_tokens"))[index].as_py(),
                "",
                problem="is more than input_tokens, which includes the cached tokens",
            )
        model = pc.fill_null(api.text(batch, "model"), UNKNOWN)
        resource, project = _billed_to(batch)
        common = {
            "start": start,
            "end": end,
            "currency": api.constant("USD", length),
            "account": _account(batch),
            "provider": api.constant("OpenAI", length),
            "service": api.constant("OpenAI API", length),
            "resource": resource,
            "sub_account": project,
            "model": model,
        }
        parts = []
        no_requests = pa.nulls(length, api.COUNT)
        for direction, tokens, requests in (
            (INPUT, uncached, counts["num_model_requests"]),
            (CACHED, cached, no_requests),
            (WRITE, write, no_requests),
            (OUTPUT, pc.fill_null(counts["output_tokens"], zero), no_requests),
        ):
            cost = api.priced("openai", model, direction, tokens, columns.unpriced, columns.prices)
            parts.append(
                api.lines(
                    length,
                    cost=cost,
                    direction=api.constant(direction, length),
                    tokens=tokens,
                    requests=requests,
                    description=pc.binary_join_element_wise(
                        model, api.constant(direction.replace("_", " "), length), ", "
                    ),
                    **common,
                )
            )
        for item in sorted(columns.unpriced):
            api.add_note(
                columns.notes, f"no catalogue price for {item}: its tokens are counted at $0"
            )
        first_line = pa.array([True] * length)
        tokens_all = pa.concat_arrays([part["ConsumedQuantity"] for part in parts])
        # A direction without tokens makes no line (the uncached input line always stays: it
        # carries the requests).
        keep = pc.or_(
            pa.concat_arrays([first_line, *[pa.array([False] * length)] * 3]),
            pc.greater(tokens_all, zero),
        )
        return api.explode(parts, keep)
