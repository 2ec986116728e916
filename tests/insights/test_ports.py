"""The ports module: explicit registries, idempotent registration, results in order."""

from apps.insights.tasks import on_spend_data_changed
from apps.projects.ports import Port, spend_data_changed


def test_registering_the_same_handler_twice_calls_it_once():
    port = Port("test")
    calls = []

    def handler(**kwargs):
        calls.append(kwargs)
        return "one"

    port.register(handler)
    port.register(handler)
    port.register(lambda **kwargs: "two")
    assert port.announce(reason="x") == ["one", "two"]
    assert calls == [{"reason": "x"}]
    assert len(port.handlers()) == 2


def test_the_insights_app_registers_its_handler_at_startup():
    assert on_spend_data_changed in spend_data_changed.handlers()
