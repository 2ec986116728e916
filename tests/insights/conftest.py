"""A small bill and GPU metrics worked out by hand, for the findings.

All on 10 March 2025 (UTC), USD, idle threshold as imported (the rollup's idle share):

resource  GPUs     line(s), GPU compute                    GPU-hours (util, idle samples)
i-a       g1       10:00 4.00, 11:00 4.00, 12:00 4.00      10:00 (60, 45), 11:00 none, 12:00 (60,30)
                   + a CPU line 10:00 100.00 (never GPU waste)
i-b       g2, g3   13:00-16:00 9.00 (3.00 an hour)         13:00 g2 (60, 60) g3 (60, 0);
                                                            14:00 g2 (40, 10); 15:00 g3 (60, 20)
i-c       g4       10:00 5.00                              10:00 (60, 0): busy
i-u       g5       10:00 20.00, no project                 10:00 (60, 30)
(none)    -        account 111 S3 15.00, no project; account 111 EC2-Other 3.00, no project

idle_gpu, by hand:
  i-a: 4.00 × 45/60 + (11:00 unmeasured) + 4.00 × 30/60 = 3.00 + 2.00 = 5.00
  i-b: 3.00 × 60/120 + 3.00 × 10/40 + 3.00 × 20/60 = 1.50 + 0.75 + 1.00 = 3.25
  i-u: 20.00 × 30/60 = 10.00; i-c: none
unattributed (threshold 10.00): i-u 20.00, 111/Amazon S3 15.00; 111/EC2-Other 3.00 is under it.
"""

from datetime import UTC, datetime
from decimal import Decimal
from itertools import count

import pytest

from apps.accounts.models import Organization
from apps.billing.models import CostKind, CostLineItem, Delivery
from apps.gpu.models import Gpu, GpuHour
from tests.factories import ExperimentFactory

_rows = count(2)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def organization(db) -> Organization:
    org = Organization.get()
    org.currency = "USD"
    org.save()
    return org


@pytest.fixture
def delivery(db) -> Delivery:
    return make_delivery()


def make_delivery() -> Delivery:
    return Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        billing_account_id="111",
        billing_period_start=at("2025-03-01 00:00"),
        billing_period_end=at("2025-04-01 00:00"),
        fingerprint="f" * 64,
        max_charge_period_end=at("2025-03-10 16:00"),
        max_usage_period_end=at("2025-03-10 16:00"),
    )


def line(
    delivery: Delivery,
    start: str,
    end: str,
    cost: str,
    *,
    resource: str = "",
    project=None,
    experiment=None,
    kind: str = CostKind.GPU_COMPUTE,
    service: str = "Amazon Elastic Compute Cloud",
    currency: str = "USD",
) -> CostLineItem:
    return CostLineItem.objects.create(
        delivery=delivery,
        source_row=next(_rows),
        billing_account_id=delivery.billing_account_id,
        billing_period_start=delivery.billing_period_start,
        billing_period_end=delivery.billing_period_end,
        charge_period_start=at(start),
        charge_period_end=at(end),
        charge_category="Usage",
        billing_currency=currency,
        billed_cost=Decimal(cost),
        effective_cost=Decimal(cost),
        service_name=service,
        resource_id=resource,
        project=project,
        experiment=experiment,
        workload="training" if project else "unattributed",
        cost_kind=kind,
    )


def gpu_hour(gpu: Gpu, hour: str, samples: int, idle: int) -> GpuHour:
    return GpuHour.objects.create(
        gpu=gpu,
        hour=at(hour),
        samples=samples,
        util_samples=samples,
        idle_share=idle / samples,
        # Idle samples read 0%, busy ones 80%: what the GPU pages draw (the findings read only
        # the idle share).
        util_mean=80.0 * (samples - idle) / samples,
    )


@pytest.fixture
def bill(organization, delivery, project):
    return build_bill(delivery, project)


def build_bill(delivery: Delivery, project) -> dict:
    run = ExperimentFactory(project=project, name="resnet", external_id="resnet-1")
    gpus = {
        name: Gpu.objects.create(
            uuid=f"GPU-{name}", host=f"host-{resource}", resource_label=resource
        )
        for name, resource in [
            ("g1", "i-a"),
            ("g2", "i-b"),
            ("g3", "i-b"),
            ("g4", "i-c"),
            ("g5", "i-u"),
        ]
    }
    for hour in ("10", "11", "12"):
        line(
            delivery,
            f"2025-03-10 {hour}:00",
            f"2025-03-10 {int(hour) + 1}:00",
            "4.00",
            resource="i-a",
            project=project,
            experiment=run,
        )
    line(
        delivery,
        "2025-03-10 10:00",
        "2025-03-10 11:00",
        "100.00",
        resource="i-a",
        project=project,
        experiment=run,
        kind=CostKind.CPU_COMPUTE,
    )
    line(delivery, "2025-03-10 13:00", "2025-03-10 16:00", "9.00", resource="i-b", project=project)
    line(delivery, "2025-03-10 10:00", "2025-03-10 11:00", "5.00", resource="i-c", project=project)
    line(delivery, "2025-03-10 10:00", "2025-03-10 11:00", "20.00", resource="i-u")
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "15.00",
        service="Amazon S3",
        kind=CostKind.STORAGE,
    )
    line(
        delivery,
        "2025-03-10 00:00",
        "2025-03-11 00:00",
        "3.00",
        service="EC2-Other",
        kind=CostKind.OTHER,
    )
    gpu_hour(gpus["g1"], "2025-03-10 10:00", 60, 45)
    gpu_hour(gpus["g1"], "2025-03-10 12:00", 60, 30)
    gpu_hour(gpus["g2"], "2025-03-10 13:00", 60, 60)
    gpu_hour(gpus["g3"], "2025-03-10 13:00", 60, 0)
    gpu_hour(gpus["g2"], "2025-03-10 14:00", 40, 10)
    gpu_hour(gpus["g3"], "2025-03-10 15:00", 60, 20)
    gpu_hour(gpus["g4"], "2025-03-10 10:00", 60, 0)
    gpu_hour(gpus["g5"], "2025-03-10 10:00", 60, 30)
    return {"run": run, "gpus": gpus}
