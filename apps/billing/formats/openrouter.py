"""OpenRouter's generation stats (per request) and activity (per day), saved as JSON.

- Generation (`/api/v1/generation?id=…`, one `{"data": {…}}` per page, or a list of them):
  `total_cost` in dollars, `created_at`, `model`, `provider_name` (the upstream), tokens
  (`native_tokens_prompt`/`_completion`, else the normalised `tokens_prompt`/`_completion`).
  The generation `id` is the key: a generation seen twice in a file counts once.
- Activity (`/api/v1/activity`, `{"data": [{date, model, usage, requests, prompt_tokens,
  completion_tokens, …}]}`): `usage` in dollars for the UTC day. BYOK inference
  (`byok_usage_inference`) is paid to the provider directly and is not in it.
The account is `openrouter`; the key billed is the `api_key_hash` where given, else the app.
"""

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from ..model_api import OTHER, UNKNOWN
from . import api_common as api
from .base import BillingFormat, ColumnMap
from .openai import ApiColumnMap


def _add(a: pa.Array, b: pa.Array) -> pa.Array:
    zero = api.zero()
    total = pc.add(pc.fill_null(a, zero), pc.fill_null(b, zero))
    return pc.if_else(pc.and_(pc.is_null(a), pc.is_null(b)), pa.scalar(None, api.COUNT), total)


class OpenRouterGenerationFormat(BillingFormat):
    name = "openrouter_generation"
    label = "OpenRouter generations"
    per_request = True

    def detect(self, header: list[str]) -> bool:
        return {"id", "total_cost", "created_at", "model"} <= set(header)

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {
            "ChargePeriodStart": "created_at",
            "ChargePeriodEnd": "created_at",
            "BilledCost": "total_cost",
            "EffectiveCost": "total_cost",
        }
        optional = [
            "id",
            "model",
            "provider_name",
            "app_id",
            "external_user",
            "api_key_hash",
            "native_tokens_prompt",
            "native_tokens_completion",
            "tokens_prompt",
            "tokens_completion",
        ]
        return ApiColumnMap(focus=focus, extra=[n for n in optional if n in header])

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        keep, dropped = api.unique_rows(api.text(batch, "id"), columns.seen, "id")
        if dropped:
            api.add_note(columns.notes, "generations listed more than once are counted once")
        length = batch.num_rows
        prompt = pc.coalesce(
            api.integers(api.text(batch, "native_tokens_prompt"), "native_tokens_prompt"),
            api.integers(api.text(batch, "tokens_prompt"), "tokens_prompt"),
        )
        completion = pc.coalesce(
            api.integers(api.text(batch, "native_tokens_completion"), "native_tokens_completion"),
            api.integers(api.text(batch, "tokens_completion"), "tokens_completion"),
        )
        created = api.text(batch, "created_at")
        app = api.text(batch, "app_id")
        out = api.lines(
            length,
            start=created,
            end=created,
            cost=api.text(batch, "total_cost"),
            currency=api.constant("USD", length),
            account=api.constant("openrouter", length),
            provider=pc.fill_null(api.text(batch, "provider_name"), "OpenRouter"),
            service=api.constant("OpenRouter", length),
            resource=pc.coalesce(api.text(batch, "api_key_hash"), app),
            sub_account=api.text(batch, "external_user"),
            model=pc.fill_null(api.text(batch, "model"), UNKNOWN),
            direction=api.constant(OTHER, length),
            tokens=_add(prompt, completion),
            requests=pa.repeat(pa.scalar(Decimal(1), api.COUNT), length),
            description=api.constant(None, length),  # a line holds a day's generations
        )
        if keep is not None:
            from ..normalise import SOURCE_INDEX

            out[SOURCE_INDEX] = pa.array(range(length), pa.int64())
            out = {name: array.filter(keep) for name, array in out.items()}
        return out


class OpenRouterActivityFormat(BillingFormat):
    name = "openrouter_activity"
    label = "OpenRouter activity"

    def detect(self, header: list[str]) -> bool:
        return {"date", "model", "usage", "requests", "prompt_tokens"} <= set(header)

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {
            "ChargePeriodStart": "date",
            "ChargePeriodEnd": "date",
            "BilledCost": "usage",
            "EffectiveCost": "usage",
        }
        optional = [
            "model",
            "provider_name",
            "requests",
            "prompt_tokens",
            "completion_tokens",
            "api_key_hash",
        ]
        return ApiColumnMap(focus=focus, extra=[n for n in optional if n in header])

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        length = batch.num_rows
        day = pc.utf8_slice_codeunits(api.text(batch, "date"), 0, 10)
        start = pc.binary_join_element_wise(day, "T00:00:00Z", "")
        moments = pc.strptime(start, format=api.ISO, unit="s", error_is_null=True)
        if moments.null_count > pc.sum(pc.is_null(day)).as_py():
            from ..errors import SourceValueError

            index = pc.index(pc.is_null(moments), True).as_py()
            raise SourceValueError(index, "date", api.text(batch, "date")[index].as_py(), "a date")
        end = pc.strftime(
            pc.add(moments, pa.scalar(86_400_000_000, pa.duration("us")).cast(pa.duration("s"))),
            api.ISO,
        )
        tokens = _add(
            api.integers(api.text(batch, "prompt_tokens"), "prompt_tokens"),
            api.integers(api.text(batch, "completion_tokens"), "completion_tokens"),
        )
        return api.lines(
            length,
            start=start,
            end=end,
            cost=api.text(batch, "usage"),
            currency=api.constant("USD", length),
            account=api.constant("openrouter", length),
            provider=pc.fill_null(api.text(batch, "provider_name"), "OpenRouter"),
            service=api.constant("OpenRouter", length),
            resource=api.text(batch, "api_key_hash"),
            sub_account=pa.nulls(length, pa.string()),
            model=pc.fill_null(api.text(batch, "model"), UNKNOWN),
            direction=api.constant(OTHER, length),
            tokens=tokens,
            requests=api.integers(api.text(batch, "requests"), "requests"),
            description=api.text(batch, "model"),
        )
