"""LiteLLM proxy spend logs (`LiteLLM_SpendLogs`, one row per request), as CSV or as the JSON
that `/spend/logs?summarize=false` (a list) or `/spend/logs/ui` (`{"data": [...]}`) returns.

`spend` is dollars (LiteLLM's own tokens × price, not the provider's invoice); `startTime` is
when the request started; `request_id` is the key: a request listed twice in a file (pages that
overlap) counts once. The model is `model` (else `model_group`), its provider
`custom_llm_provider`; the key billed is `api_key` (LiteLLM's hash of the virtual key), the
team `team_id`; `request_tags` become tags (`team:search` → team = search) for the aliases and
rules. Tokens are `total_tokens` (else prompt + completion), one request per row. LiteLLM's FOCUS
export is FOCUS and is read by that format (the model is its ResourceName, the team its
SubAccountId).
"""

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from ..model_api import OTHER, UNKNOWN
from ..normalise import SOURCE_INDEX
from . import api_common as api
from .base import BillingFormat, ColumnMap
from .openai import ApiColumnMap
from .openrouter import _add

OPTIONAL = (
    "endTime",
    "model",
    "model_group",
    "custom_llm_provider",
    "api_key",
    "team_id",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "request_tags",
)


class LiteLlmSpendLogsFormat(BillingFormat):
    name = "litellm_spend_logs"
    label = "LiteLLM spend logs"
    per_request = True

    def detect(self, header: list[str]) -> bool:
        return {"request_id", "spend", "startTime"} <= set(header)

    def column_map(self, header: list[str]) -> ColumnMap:
        focus = {
            "ChargePeriodStart": "startTime",
            "ChargePeriodEnd": "endTime" if "endTime" in header else "startTime",
            "BilledCost": "spend",
            "EffectiveCost": "spend",
        }
        # Named in errors by the column they came from.
        focus.update(
            {
                focus_name: source
                for focus_name, source in (("ResourceId", "api_key"), ("SubAccountId", "team_id"))
                if source in header
            }
        )
        extra = ["request_id", *(name for name in OPTIONAL if name in header)]
        return ApiColumnMap(focus=focus, extra=extra)

    def extras(self, batch, columns):
        return {}

    def to_focus(self, batch: pa.RecordBatch, columns: ColumnMap) -> dict[str, pa.Array]:
        keep, dropped = api.unique_rows(api.text(batch, "request_id"), columns.seen, "request_id")
        if dropped:
            api.add_note(columns.notes, "requests listed more than once are counted once")
        length = batch.num_rows
        start = api.text(batch, "startTime")
        end = pc.coalesce(api.text(batch, "endTime"), start)
        tokens = api.integers(api.text(batch, "total_tokens"), "total_tokens")
        if tokens.null_count:  # else prompt and completion add nothing (nor need reading)
            tokens = pc.coalesce(
                tokens,
                _add(
                    api.integers(api.text(batch, "prompt_tokens"), "prompt_tokens"),
                    api.integers(api.text(batch, "completion_tokens"), "completion_tokens"),
                ),
            )
        tags = api.text(batch, "request_tags")
        out = api.lines(
            length,
            start=start,
            end=end,
            cost=api.text(batch, "spend"),
            currency=api.constant("USD", length),
            account=api.constant("litellm", length),
            provider=pc.fill_null(api.text(batch, "custom_llm_provider"), "LiteLLM"),
            service=api.constant("LiteLLM proxy", length),
            resource=api.text(batch, "api_key"),
            sub_account=api.text(batch, "team_id"),
            model=pc.fill_null(
                pc.coalesce(api.text(batch, "model"), api.text(batch, "model_group")), UNKNOWN
            ),
            direction=api.constant(OTHER, length),
            tokens=tokens,
            requests=pa.repeat(pa.scalar(Decimal(1), api.COUNT), length),
            description=api.constant(None, length),  # a line holds a day's requests
            tags=None if tags.null_count == length else api.tags_from_list(tags, "request_tags"),
        )
        if keep is not None:
            out[SOURCE_INDEX] = pa.array(range(length), pa.int64())
            out = {name: array.filter(keep) for name, array in out.items()}
        return out
