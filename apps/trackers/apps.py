from django.apps import AppConfig


class TrackersConfig(AppConfig):
    """MLflow and Weights & Biases runs imported as experiments, with their cost written back."""

    name = "apps.trackers"
    label = "trackers"
    verbose_name = "Experiment trackers"
