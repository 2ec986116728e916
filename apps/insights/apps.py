from django.apps import AppConfig


class InsightsConfig(AppConfig):
    name = "apps.insights"
    label = "insights"

    def ready(self) -> None:
        from apps.billing.ports import model_prices
        from apps.projects.ports import spend_data_changed

        from .model_prices import catalogue_model_prices
        from .tasks import on_spend_data_changed

        spend_data_changed.register(on_spend_data_changed)
        model_prices.register(catalogue_model_prices)
