"""`manage.py import_billing`: one JSON object per line per delivery, non-zero exit on failure,
and --async handing the work to Celery."""

import json
import re
import time
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.billing.management.commands import import_billing as command_module
from apps.billing.models import ImportRun

from .conftest import focus_line, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


def import_billing(*args) -> list[str]:
    out = StringIO()
    call_command("import_billing", *[str(a) for a in args], stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def two_months(tmp_path):
    return write_focus(
        tmp_path / "jan-feb.csv",
        [
            focus_line(
                Tags='{"project": "vision"}', EffectiveCost="10.000000000001", BilledCost="11"
            ),
            focus_line(BillingCurrency="EUR", EffectiveCost="2.5", BilledCost="2.5"),
            focus_line(
                BillingPeriodStart="2025-02-01T00:00:00Z",
                BillingPeriodEnd="2025-03-01T00:00:00Z",
                ChargePeriodStart="2025-02-01T00:00:00Z",
                ChargePeriodEnd="2025-02-01T01:00:00Z",
                EffectiveCost="1",
                BilledCost="1",
            ),
        ],
    )


def test_json_prints_one_object_per_delivery(acme, two_months):
    lines = [json.loads(line) for line in import_billing(two_months, "--json")]

    for line in lines:
        assert isinstance(line.pop("seconds"), float)
        assert isinstance(line.pop("import_run"), int)
        assert line.pop("notes") == []
    assert lines == [
        {
            "file": str(two_months),
            "format": "focus",
            "status": "succeeded",
            "rows": 2,
            "line_items": 2,
            "billed_cost": {"EUR": "2.50", "USD": "11.00"},
            "effective_cost": {"EUR": "2.50", "USD": "10.000000000001"},
            "billing_period_start": "2025-01-01T00:00:00Z",
            "billing_period_end": "2025-02-01T00:00:00Z",
            "billing_account_id": "111111111111",
        },
        {
            "file": str(two_months),
            "format": "focus",
            "status": "succeeded",
            "rows": 1,
            "line_items": 1,
            "billed_cost": {"USD": "1.00"},
            "effective_cost": {"USD": "1.00"},
            "billing_period_start": "2025-02-01T00:00:00Z",
            "billing_period_end": "2025-03-01T00:00:00Z",
            "billing_account_id": "111111111111",
        },
    ]


def test_json_says_unchanged_the_second_time(acme, two_months):
    import_billing(two_months, "--json")

    lines = [json.loads(line) for line in import_billing(two_months, "--json")]

    assert [(line["status"], line["rows"]) for line in lines] == [
        ("unchanged", 2),
        ("unchanged", 1),
    ]


def test_a_failed_file_prints_its_error_and_the_command_fails(acme, two_months, tmp_path):
    bad = write_focus(tmp_path / "bad.csv", [focus_line(BilledCost="twelve")])
    out = StringIO()

    with pytest.raises(CommandError, match="1 of the imported deliveries failed.") as failure:
        call_command("import_billing", str(two_months), str(bad), "--json", stdout=out)

    assert failure.value.returncode == 1
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["status"] for line in lines] == ["succeeded", "succeeded", "failed"]
    assert lines[2]["error"] == (
        "bad.csv: row 2, column BilledCost: 'twelve' is not a decimal number"
    )
    assert lines[2]["file"] == str(bad)
    assert (lines[2]["line_items"], lines[2]["billed_cost"]) == (0, {})


def test_format_focus_forces_the_format(acme, tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("date,amount\n2025-01-01,3\n")

    with pytest.raises(CommandError):
        import_billing(path, "--format", "focus", "--json")

    run = ImportRun.objects.get()
    assert (run.requested_format, run.status) == ("focus", "failed")
    assert run.error == (
        "plain.csv: missing mandatory FOCUS columns BillingAccountId, BillingPeriodStart, "
        "BillingPeriodEnd, ChargePeriodStart, ChargePeriodEnd, BillingCurrency, BilledCost, "
        "EffectiveCost, ChargeCategory"
    )


def test_the_plain_output_is_one_readable_line(acme, two_months):
    lines = import_billing(two_months)

    assert lines[0].startswith(
        f"succeeded  {two_months}: account 111111111111, 2025-01, 2 rows, 2 line items, "
        "spend EUR 2.50, USD 10.000000000001, billed EUR 2.50, USD 11.00 ("
    )


def test_async_queues_the_run_for_a_worker(
    acme, two_months, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        lines = [json.loads(line) for line in import_billing(two_months, "--async", "--json")]

    run = ImportRun.objects.get()
    assert lines == [{"file": str(two_months), "status": "queued", "import_run": run.pk}]
    assert run.status == ImportRun.Status.QUEUED
    assert len(callbacks) == 1

    callbacks[0]()  # what the broker would deliver after the commit

    run.refresh_from_db()
    assert (run.status, run.line_items) == (ImportRun.Status.SUCCEEDED, 3)


def test_the_plain_output_ends_with_where_the_whole_run_went(acme, two_months, monkeypatch):
    """The seconds on each delivery's line are its file's import; the last line adds what the
    imports' commit started (run in the command's process when Celery runs eagerly) and the
    time since the process started, start-up included."""
    real = command_module.import_run_execute

    def then_a_recompute(*, import_run, committed):
        run = real(import_run=import_run)
        # The load commits (here the test's transaction holds the commit back: called by
        # hand), then its commit's hooks run, as the findings recompute does when eager.
        committed()
        time.sleep(0.3)
        return run

    monkeypatch.setattr(command_module, "import_run_execute", then_a_recompute)
    monkeypatch.setattr(settings, "CELERY_TASK_ALWAYS_EAGER", True)

    lines = import_billing(two_months)

    assert len(lines) == 3
    assert re.fullmatch(
        r"done       importing \d+\.\d s, then 0\.[3-9] s of the work the imports started "
        r"\(the findings recompute and the rest, run in this process as Celery runs tasks "
        r"eagerly here; with CELERY_TASK_ALWAYS_EAGER=false a worker takes it\); "
        r"\d+\.\d s since the process started",
        lines[-1],
    ), lines[-1]
    # JSON stays one object per delivery.
    assert len(import_billing(two_months, "--json")) == 2


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_the_import_is_timed_to_its_commit_and_the_commits_hooks_after_it(
    acme, two_months, monkeypatch
):
    """The command's `committed` hook is the commit's first callback: it runs once the lines are
    committed (visible to another connection), before the hooks the ports registered (the
    tasks a commit enqueues), which the command counts as the work the import started."""
    from django.db import connections, transaction

    from apps.billing.models import CostLineItem
    from apps.billing.services import import_run_create, import_run_execute
    from apps.projects.ports import spend_data_changed

    order = []

    def hook(**period):
        transaction.on_commit(lambda: order.append("the ports' hook"))

    def committed():
        with connections["progress"].cursor() as cursor:  # another connection
            cursor.execute(f"SELECT count(*) FROM {CostLineItem._meta.db_table}")
            order.append(f"committed, {cursor.fetchone()[0]} lines seen")

    handlers = spend_data_changed._handlers
    monkeypatch.setattr(spend_data_changed, "_handlers", [hook])
    run = import_run_execute(
        import_run=import_run_create(paths=[str(two_months)], requested_format="auto"),
        committed=committed,
    )
    assert handlers  # (the real ones, put back by monkeypatch)

    assert run.status == ImportRun.Status.SUCCEEDED
    # Two deliveries (January, February): one hook each, after the commit.
    assert order == ["committed, 3 lines seen", "the ports' hook", "the ports' hook"]
