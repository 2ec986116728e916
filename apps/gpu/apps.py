from django.apps import AppConfig


class GpuConfig(AppConfig):
    name = "apps.gpu"
    label = "gpu"
    verbose_name = "GPU metrics"
