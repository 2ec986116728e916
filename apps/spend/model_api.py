"""Model API spend on the pages: what the hosted models cost, by provider and model, with the
tokens bought, the cost per million tokens and the share of input tokens read from a cache.

Read from the model API rollup (billing's DailyModelApiCost), narrowed as every spend section is
(the user's projects, the page's project, deployments or provider) and kept to the
organisation's currency. It is inference spend: the workload of every line unless a rule says
otherwise."""

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, QuerySet, Sum

from apps.billing.models import DailyModelApiCost, TokenDirection

from .rollup import Period, SpendScope, _in_period

MILLION = Decimal(1_000_000)
ZERO = Decimal(0)
INPUTS = (TokenDirection.INPUT, TokenDirection.CACHED_INPUT, TokenDirection.CACHE_WRITE)


@dataclass(frozen=True)
class ModelApiRow:
    provider: str
    model: str
    cost: Decimal
    tokens: Decimal
    input_tokens: Decimal
    cached_tokens: Decimal
    requests: Decimal

    @property
    def per_million(self) -> Decimal | None:
        """Dollars per million tokens, where the bill counts tokens."""
        return self.cost * MILLION / self.tokens if self.tokens else None

    @property
    def cached_share(self) -> Decimal | None:
        """Cached input tokens as a share of all input tokens, where input is counted apart."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else None


@dataclass(frozen=True)
class ModelApiSpend:
    rows: list[ModelApiRow]

    @property
    def total(self) -> Decimal:
        return sum((row.cost for row in self.rows), ZERO)

    @property
    def tokens(self) -> Decimal:
        return sum((row.tokens for row in self.rows), ZERO)


def _rows(scope: SpendScope, period: Period | None) -> QuerySet[DailyModelApiCost]:
    q = Q()
    if scope.experiment_ids is not None or scope.deployment_ids is not None:
        # An experiment buys no tokens through a deployment's key: only deployments count.
        q &= Q(deployment_id__in=scope.deployment_ids or ())
        narrowed = SpendScope(
            currency=scope.currency,
            project_ids=scope.project_ids,
            unattributed=scope.unattributed,
            team=scope.team,
            project=scope.project,
            provider=scope.provider,
            workload=scope.workload,
        )
        q &= narrowed.q()
    else:
        q &= scope.q()
    rows = DailyModelApiCost.objects.filter(q, billing_currency=scope.currency)
    return _in_period(rows, period)


def model_api_spend(*, scope: SpendScope, period: Period | None) -> ModelApiSpend:
    """Model API spend by provider and model, the dearest first."""
    grouped = (
        _rows(scope, period)
        .values("provider_name", "model")
        .annotate(
            total_cost=Sum("effective_cost"),
            total_tokens=Sum("tokens"),
            total_requests=Sum("requests"),
            input_tokens=Sum("tokens", filter=Q(token_direction__in=INPUTS)),
            cached_tokens=Sum("tokens", filter=Q(token_direction=TokenDirection.CACHED_INPUT)),
        )
        .order_by("-total_cost", "provider_name", "model")
    )
    return ModelApiSpend(
        rows=[
            ModelApiRow(
                provider=item["provider_name"],
                model=item["model"],
                cost=item["total_cost"] or ZERO,
                tokens=item["total_tokens"] or ZERO,
                input_tokens=item["input_tokens"] or ZERO,
                cached_tokens=item["cached_tokens"] or ZERO,
                requests=item["total_requests"] or ZERO,
            )
            for item in grouped
        ]
    )
