"""Billing's own port: what the importer asks a higher app for, without importing it.

- `model_prices`: prices per token of hosted models, for usage reports that give tokens but no
  cost (OpenAI's Usage API, Anthropic's messages usage report). The insights app registers the
  price catalogue. Handlers take `(*, provider: str, models: list[str])` and return
  `{model: {token direction: price per token (Decimal)}}` for the models they price; a model no
  handler prices is imported with its tokens and no cost, and the import's result says so.
"""

from decimal import Decimal

from apps.projects.ports import Port

model_prices = Port("model API prices")


def prices_for(*, provider: str, models: list[str]) -> dict[str, dict[str, Decimal]]:
    """What the registered handlers price of these models (the first handler to price wins)."""
    found: dict[str, dict[str, Decimal]] = {}
    for answer in model_prices.announce(provider=provider, models=models):
        for model, prices in (answer or {}).items():
            found.setdefault(model, prices)
    return found
