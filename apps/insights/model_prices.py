"""The price catalogue answering billing's `model_prices` port: per token, per direction."""

import re
from decimal import Decimal

from .models import ModelApiPrice

DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def catalogue_model_prices(*, provider: str, models: list[str]) -> dict[str, dict[str, Decimal]]:
    """Each model's prices by its exact name, the provider's prefixed name
    (`anthropic/claude-…`), or its name without a date suffix (`gpt-4o-2024-08-06` → `gpt-4o`).
    Cache writes are not in the catalogue, so they are not priced here."""
    wanted: dict[str, list[str]] = {}
    for model in models:
        names = [model, f"{provider}/{model}"]
        undated = DATED.sub("", model)
        if undated != model:
            names += [undated, f"{provider}/{undated}"]
        wanted[model] = names
    rows = {
        row.name: row
        for row in ModelApiPrice.objects.filter(
            name__in=[name for names in wanted.values() for name in names]
        )
    }
    out = {}
    for model, names in wanted.items():
        row = next((rows[name] for name in names if name in rows), None)
        if row is None:
            continue
        prices = {
            "input": row.input_per_token,
            "output": row.output_per_token,
            "cached_input": row.cached_input_per_token,
        }
        out[model] = {direction: price for direction, price in prices.items() if price is not None}
    return out
