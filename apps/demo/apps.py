from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo: `seed_demo` and the builders of its organisation, bill and GPU metrics. It sits
    on top of every other app (last in INSTALLED_APPS); nothing imports it."""

    name = "apps.demo"
    label = "demo"
