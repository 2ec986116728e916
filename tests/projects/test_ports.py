"""The two ports: explicit registries, and exactly who is registered with each."""

from datetime import date

import pytest

from apps.billing.services import attribution_schedule
from apps.digests.tasks import on_spend_data_changed as alerts_check_later
from apps.gpu.daily import ownership_changed_handler as gpu_days_stale
from apps.insights.tasks import on_spend_data_changed
from apps.projects.ports import Port, ownership_changed, spend_data_changed
from apps.spend.figures import joined_bump, version_bump


def test_billing_the_gpu_daily_rollup_and_the_spend_figures_handle_ownership_changed():
    # Billing re-attributes; gpu marks the fleet page's daily rollup out of date; spend moves the
    # data version its cached figures are keyed by, and the joined one (resources registered in
    # bulk send no signal, and the project page's runs show how many each has).
    assert ownership_changed.handlers() == (attribution_schedule, gpu_days_stale, joined_bump)


def test_spend_insights_and_digests_are_the_handlers_of_spend_data_changed():
    # The spend figures' data version moves, the findings recompute for the changed days, then
    # the digests' alerts check.
    assert spend_data_changed.handlers() == (
        version_bump,
        on_spend_data_changed,
        alerts_check_later,
    )


def test_a_port_calls_its_handlers_in_order_and_returns_their_results():
    port = Port("test")
    heard = []

    def first(*, start, end, reason):
        heard.append(("first", start, end, reason))
        return 1

    def second(*, start, end, reason):
        heard.append(("second", start, end, reason))
        return None

    port.register(first)
    port.register(second)
    port.register(first)  # the same handler twice is registered once

    assert port.handlers() == (first, second)
    assert port.announce(start=date(2025, 1, 1), end=date(2025, 2, 1), reason="delivery") == [
        1,
        None,
    ]
    assert heard == [
        ("first", date(2025, 1, 1), date(2025, 2, 1), "delivery"),
        ("second", date(2025, 1, 1), date(2025, 2, 1), "delivery"),
    ]
    assert repr(port) == "Port('test')"


def test_a_port_without_handlers_announces_to_no_one():
    assert Port("empty").announce(start=date(2025, 1, 1), end=date(2025, 1, 2), reason="x") == []


def test_a_muted_handler_hears_nothing_inside_the_block_and_is_back_in_its_place_after():
    port = Port("test")
    heard = []

    def handler(name):
        def hear(*, start, end, reason):
            heard.append((name, reason))

        return hear

    first, second, third = handler("first"), handler("second"), handler("third")
    for each in (first, second, third):
        port.register(each)

    with port.muted(second):
        assert port.handlers() == (first, third)
        port.announce(start=date(2025, 1, 1), end=date(2025, 1, 2), reason="inside")
    port.announce(start=date(2025, 1, 1), end=date(2025, 1, 2), reason="after")

    assert port.handlers() == (first, second, third)
    assert heard == [
        ("first", "inside"),
        ("third", "inside"),
        ("first", "after"),
        ("second", "after"),
        ("third", "after"),
    ]


def test_a_handler_muted_by_a_block_that_raised_is_registered_again():
    port = Port("test")

    def hear(*, start, end, reason):
        return reason

    def deaf(*, start, end, reason):
        return None

    port.register(hear)
    with pytest.raises(RuntimeError), port.muted(hear):
        raise RuntimeError("the block failed")

    assert port.handlers() == (hear,)
    with pytest.raises(ValueError) as error, port.muted(deaf):
        pass
    assert str(error.value) == (
        "test_a_handler_muted_by_a_block_that_raised_is_registered_again.<locals>.deaf "
        "is not registered with Port('test')"
    )
