"""The caching lever of hosted model API spend (issue 26, kind `model_api_caching`): the
cached-input share per model and key over the last 30 days of the bill, and what caching more of
the prompt would save where the provider prices cached tokens below input tokens.

Per key (the line's resource id: an API key, else a project, workspace or team) and model, from
the model API rollup (DailyModelApiCost), with the token directions disjoint as the importers
write them (input = uncached input, cached input, cache write):

- input tokens = uncached + cached + cache write; cached share = cached ÷ input tokens;
- the input price is the bill's (uncached input cost ÷ its tokens), else the catalogue's; the
  cached price is the bill's (cached input cost ÷ its tokens), else the catalogue's cached-input
  price; no cached price, or one not below the input price: no lever for the model;
- under the target share (CACHED_SHARE_TARGET of the input tokens), caching more moves
  min(target × input tokens − cached, uncached) tokens to the cached price:
  saving = those tokens × (input price − cached price), for the 30 days as a month.

The finding's subject is the key, so on a deployment whose main resource is the key it counts
once with the deployment's other levers (the largest of them counts); a saving, never waste.
Cache writes cost more than input (Anthropic: 1.25x for 5 minutes) and are left as they are.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Max, Sum

from apps.billing.models import DailyModelApiCost, TokenDirection

from .compute import SubjectHours
from .compute_part3 import _lever_window
from .model_prices import catalogue_model_prices

ZERO = Decimal(0)


def _plain(value: Decimal) -> str:
    """A Decimal without trailing zeros or an exponent: 2000, 0.3, 1.35."""
    return format(value.normalize(), "f")


# The share of a model's input tokens a prompt with a stable prefix (system prompt, tools,
# few-shot examples, a document asked about again) reads from the provider's cache.
CACHED_SHARE_TARGET = Decimal("0.5")
MILLION = Decimal(1_000_000)
PLACES = Decimal("1e-10")


@dataclass(frozen=True)
class ModelTokens:
    """One key's model over the 30 days, in one currency."""

    provider: str
    model: str
    currency: str
    uncached_tokens: Decimal
    cached_tokens: Decimal
    write_tokens: Decimal
    uncached_cost: Decimal
    cached_cost: Decimal
    catalogue_input: Decimal | None = None  # per token
    catalogue_cached: Decimal | None = None

    @property
    def input_tokens(self) -> Decimal:
        return self.uncached_tokens + self.cached_tokens + self.write_tokens

    @property
    def cached_share(self) -> Decimal | None:
        return self.cached_tokens / self.input_tokens if self.input_tokens else None

    @property
    def input_price(self) -> Decimal | None:
        if self.uncached_tokens and self.uncached_cost:
            return self.uncached_cost / self.uncached_tokens
        return self.catalogue_input

    @property
    def cached_price(self) -> Decimal | None:
        if self.cached_tokens and self.cached_cost:
            return self.cached_cost / self.cached_tokens
        return self.catalogue_cached


@dataclass(frozen=True)
class ModelSaving:
    tokens: ModelTokens
    moved_tokens: Decimal
    saving: Decimal


def model_saving(row: ModelTokens, target: Decimal = CACHED_SHARE_TARGET) -> ModelSaving | None:
    """What caching up to `target` of the model's input tokens saves; None when it cannot
    (no cached price, one not below the input price, at or above the target already)."""
    share = row.cached_share
    input_price, cached_price = row.input_price, row.cached_price
    if share is None or input_price is None or cached_price is None:
        return None
    if cached_price >= input_price or share >= target:
        return None
    moved = min(target * row.input_tokens - row.cached_tokens, row.uncached_tokens)
    if moved <= 0:
        return None
    return ModelSaving(tokens=row, moved_tokens=moved, saving=moved * (input_price - cached_price))


@dataclass
class KeyFacts:
    key: str
    owner: tuple  # project, experiment, deployment
    models: list[ModelTokens] = field(default_factory=list)


def _per_million(price: Decimal | None) -> str | None:
    return None if price is None else _plain((price * MILLION).quantize(PLACES))


def key_lever(facts: KeyFacts, target: Decimal = CACHED_SHARE_TARGET) -> SubjectHours | None:
    """The key's finding: the saving of its models in the currency that saves most."""
    by_currency: dict[str, list[ModelSaving]] = defaultdict(list)
    for row in facts.models:
        found = model_saving(row, target)
        if found is not None:
            by_currency[row.currency].append(found)
    if not by_currency:
        return None
    currency, savings = max(
        by_currency.items(), key=lambda item: (sum(s.saving for s in item[1]), item[0])
    )
    total = sum((s.saving for s in savings), ZERO)
    if total <= 0:
        return None
    savings.sort(key=lambda s: (-s.saving, s.tokens.model))
    first = savings[0].tokens
    share = (first.cached_share * 100).quantize(Decimal("0.1"))
    reason = (
        f"{share}% of {first.model}'s input tokens were read from the cache: caching "
        f"{int(target * 100)}% would save {currency} {total.quantize(Decimal('0.01')):,} a month"
    )
    return SubjectHours(
        line_key=facts.key,
        resource_id=facts.key,
        savings_per_month={currency: total},
        reason=reason[:500],
        evidence={
            "key": facts.key,
            "currency": currency,
            "target_percent": str(int(target * 100)),
            "models": [
                {
                    "provider": s.tokens.provider,
                    "model": s.tokens.model,
                    "input_tokens": _plain(s.tokens.input_tokens),
                    "cached_tokens": _plain(s.tokens.cached_tokens),
                    "cached_percent": str((s.tokens.cached_share * 100).quantize(Decimal("0.1"))),
                    "input_per_million": _per_million(s.tokens.input_price),
                    "cached_per_million": _per_million(s.tokens.cached_price),
                    "moved_tokens": _plain(s.moved_tokens),
                    "saving": _plain(s.saving.quantize(PLACES)),
                }
                for s in savings
            ],
        },
        owner=facts.owner,
    )


DIRECTIONS = {
    TokenDirection.INPUT: "uncached",
    TokenDirection.CACHED_INPUT: "cached",
    TokenDirection.CACHE_WRITE: "write",
}


def key_facts() -> list[KeyFacts]:
    """Every key billed model API input in the last 30 days of the bill, with its models' input
    tokens and costs by direction (one grouped read of the rollup) and the catalogue's prices."""
    window = _lever_window()
    if window is None:
        return []
    low, high = window
    rows = (
        DailyModelApiCost.objects.filter(
            day__gte=low.date(),
            day__lt=high.date(),
            token_direction__in=list(DIRECTIONS),
        )
        .exclude(resource_id="")
        .values("resource_id", "provider_name", "model", "billing_currency", "token_direction")
        .annotate(
            tokens=Sum("tokens"),
            cost=Sum("effective_cost"),
            project=Max("project_id"),
            deployment=Max("deployment_id"),
        )
        .order_by("resource_id", "provider_name", "model", "billing_currency")
    )
    sums: dict[tuple, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    owners: dict[str, tuple] = {}
    for row in rows:
        name = DIRECTIONS[row["token_direction"]]
        key = (row["resource_id"], row["provider_name"], row["model"], row["billing_currency"])
        sums[key][f"{name}_tokens"] += row["tokens"] or ZERO
        sums[key][f"{name}_cost"] += row["cost"] or ZERO
        if row["project"] is not None:
            owners.setdefault(row["resource_id"], (row["project"], None, row["deployment"]))
    by_provider: dict[str, set[str]] = defaultdict(set)
    for _resource, provider, model, _currency in sums:
        by_provider[provider].add(model)
    prices = {
        provider: catalogue_model_prices(provider=provider.lower(), models=sorted(models))
        for provider, models in by_provider.items()
    }
    facts: dict[str, KeyFacts] = {}
    for (resource, provider, model, currency), figures in sums.items():
        catalogue = prices[provider].get(model, {})
        item = facts.setdefault(
            resource, KeyFacts(key=resource, owner=owners.get(resource, (None, None, None)))
        )
        item.models.append(
            ModelTokens(
                provider=provider,
                model=model,
                currency=currency,
                uncached_tokens=figures["uncached_tokens"],
                cached_tokens=figures["cached_tokens"],
                write_tokens=figures["write_tokens"],
                uncached_cost=figures["uncached_cost"],
                cached_cost=figures["cached_cost"],
                # The catalogue prices in its own currency: only a USD bill may read it.
                catalogue_input=catalogue.get("input") if currency == "USD" else None,
                catalogue_cached=catalogue.get("cached_input") if currency == "USD" else None,
            )
        )
    return list(facts.values())


def model_api_caching_hours(*, start, end) -> dict[str, SubjectHours]:
    """The lever's findings: savings per month, reason and evidence per key; no hours."""
    subjects = {}
    for facts in key_facts():
        found = key_lever(facts)
        if found is not None:
            subjects[facts.key] = found
    return subjects
