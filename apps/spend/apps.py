from django.apps import AppConfig


class SpendConfig(AppConfig):
    """Everything that reads spend: the rollup plan, periods, the spend selectors, the overview,
    unattributed and claim pages, the spend charts and the CSV exports. No models."""

    name = "apps.spend"
    label = "spend"
