"""Two imports of one billing account's month at the same time (two workers taking two polled
files) end as if they had run one after the other: both succeed, the later replaces the earlier."""

import threading
from decimal import Decimal

import pytest
from django.db import connections

from apps.billing.models import Delivery, ImportRun
from apps.billing.services import _Importer, import_run_create, import_run_execute
from apps.spend.selectors import spend_totals

from .conftest import focus_line, write_focus

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "progress"])


def run_together(paths) -> list[ImportRun]:
    """Import each path in a thread of its own, both loaded before either settles."""
    runs = [import_run_create(paths=[str(path)]) for path in paths]
    loaded = threading.Barrier(len(runs), timeout=60)
    settle = _Importer._settle

    def settle_after_both_loaded(importer, *args, **kwargs):
        loaded.wait()
        return settle(importer, *args, **kwargs)

    errors = []

    def work(run):
        try:
            import_run_execute(import_run=run)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Importer, "_settle", settle_after_both_loaded)
        threads = [threading.Thread(target=work, args=(run,)) for run in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
    assert errors == []
    for run in runs:
        run.refresh_from_db()
    return runs


def test_two_versions_of_one_month_both_succeed_and_one_is_current(acme, tmp_path):
    first = write_focus(tmp_path / "a.csv", [focus_line(EffectiveCost="5.00", BilledCost="5.00")])
    second = write_focus(tmp_path / "b.csv", [focus_line(EffectiveCost="7.25", BilledCost="7.25")])
    runs = run_together([first, second])
    assert [run.status for run in runs] == ["succeeded", "succeeded"]
    assert Delivery.objects.filter(status="current").count() == 1
    assert Delivery.objects.filter(status="replaced").count() == 1
    current = Delivery.objects.get(status="current")
    assert current.effective_cost == {"USD": "5.00" if current.file == str(first) else "7.25"}
    total = spend_totals(by=())[0].effective_cost
    assert total == Decimal(current.effective_cost["USD"])


def test_the_same_file_twice_at_once_counts_once(acme, tmp_path):
    bill = write_focus(tmp_path / "a.csv", [focus_line(EffectiveCost="5.00", BilledCost="5.00")])
    runs = run_together([bill, bill])
    assert sorted(run.status for run in runs) == ["succeeded", "unchanged"]
    assert Delivery.objects.count() == 1
    assert spend_totals(by=())[0].effective_cost == Decimal("5.00")
