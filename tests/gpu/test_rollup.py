"""The hourly rollup never counts a sample twice: re-imports, overlapping windows, two sources."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.conf import settings

from apps.gpu import rollup, services
from apps.gpu.models import GpuHour
from apps.projects.ports import Port

from .helpers import all_hours, at, hour_values

U = "GPU-0c0c0c0c-1111-2222-3333-444444444444"
HEADER = "timestamp, uuid, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"


def smi(*rows: tuple[str, float]) -> str:
    """An nvidia-smi log of GPU U: (time 'HH:MM:SS' on 2026-07-14, utilisation)."""
    return HEADER + "".join(
        f"2026/07/14 {moment}.000, {U}, {util:g} %, {util * 100:g} MiB, {util + 50:g} W\n"
        for moment, util in rows
    )


def every(start: str, minutes: int, count: int, util=lambda n: 10.0 * n) -> list[tuple[str, float]]:
    first = at(f"2026-07-14 {start}")
    return [(f"{first + timedelta(minutes=minutes * n):%H:%M:%S}", util(n)) for n in range(count)]


def test_importing_the_same_file_again_changes_nothing(load):
    text = smi(*every("10:00:00", 10, 12))
    first = load(text, "nvidia-smi", host="h")
    before = all_hours()

    again = load(text, "nvidia-smi", host="h")

    assert (first.samples, first.hours) == (12, 2)
    assert (again.samples, again.gpus, again.hours) == (0, 0, 0)
    assert all_hours() == before


def test_overlapping_windows_count_the_shared_samples_once_in_either_order(load):
    # A: 10:00-10:30 and B: 10:20-10:50, every 10 minutes; they share 10:20 and 10:30.
    window_a = smi(("10:00:00", 0), ("10:10:00", 20), ("10:20:00", 40), ("10:30:00", 60))
    window_b = smi(("10:20:00", 40), ("10:30:00", 60), ("10:40:00", 80), ("10:50:00", 100))
    expected = {
        "samples": 6,
        "util_samples": 6,
        "util_mean": 50.0,  # (0 + 20 + 40 + 60 + 80 + 100) / 6
        "util_max": 100.0,
        "idle_share": 1 / 6,
        "memory_used_mib": 5000.0,
        "memory_used_max_mib": 10000.0,
        "memory_total_mib": None,
        "power_watts": 100.0,
        "power_max_watts": 150.0,
    }

    load(window_a, "nvidia-smi", host="h")
    second = load(window_b, "nvidia-smi", host="h")
    assert second.samples == 2
    assert hour_values(U, "2026-07-14 10:00") == expected

    GpuHour.objects.all().delete()
    load(window_b, "nvidia-smi", host="h")
    load(window_a, "nvidia-smi", host="h")
    assert hour_values(U, "2026-07-14 10:00") == expected


def test_a_pull_after_scrapes_of_the_same_minutes_counts_only_what_they_did_not_cover(load):
    # dcgm-exporter scraped every 30 s from 10:00:00 to 10:10:00 ...
    for n in range(21):
        load(
            f'DCGM_FI_DEV_GPU_UTIL{{UUID="{U}",gpu="0",Hostname="h"}} 50\n',
            "dcgm",
            taken_at=at("2026-07-14 10:00") + timedelta(seconds=30 * n),
        )
    # ... then Prometheus is pulled for 10:00:07-10:14:07 at a 60 s step: its own moments, of the
    # same GPU. Only the five after 10:10:00 are new.
    values = [
        [int((at("2026-07-14 10:00:07") + timedelta(minutes=k)).timestamp()), "90"]
        for k in range(15)
    ]
    pull = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
        f'{{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"{U}","gpu":"0","Hostname":"h"}},'
        f'"values":{values}}}]}}}}'
    ).replace("'", '"')

    outcome = load(pull, "prometheus-json")

    assert outcome.samples == 5
    row = hour_values(U, "2026-07-14 10:00")
    assert row["samples"] == 26
    assert row["util_mean"] == pytest.approx((21 * 50 + 5 * 90) / 26)


def test_a_hole_longer_than_two_minutes_is_filled_by_a_later_import(load):
    load(smi(*every("10:00:00", 1, 11), *every("10:20:00", 1, 11)), "nvidia-smi", host="h")

    filled = load(smi(*every("10:10:00", 1, 11)), "nvidia-smi", host="h")

    # 10:10 and 10:20 were counted already; the nine minutes between were not.
    assert filled.samples == 9
    assert hour_values(U, "2026-07-14 10:00")["samples"] == 31


def test_samples_either_side_of_the_hour_go_to_their_own_hours(load):
    load(
        HEADER
        + f"2026/07/14 10:59:59.999, {U}, 40 %, 1 MiB, 1 W\n"
        + f"2026/07/14 11:00:00.000, {U}, 80 %, 1 MiB, 1 W\n",
        "nvidia-smi",
        host="h",
    )

    assert hour_values(U, "2026-07-14 10:00")["util_mean"] == 40.0
    assert hour_values(U, "2026-07-14 11:00")["util_mean"] == 80.0


def test_idle_means_under_the_organisations_threshold(load, organization):
    organization.idle_threshold_percent = Decimal("50")
    organization.save()

    load(
        smi(("10:00:00", 10), ("10:10:00", 49.5), ("10:20:00", 50), ("10:30:00", 90)),
        "nvidia-smi",
        host="h",
    )

    row = GpuHour.objects.get()
    assert row.idle_share == 0.5  # 10 and 49.5 are under 50; 50 is not
    assert row.idle_threshold_percent == Decimal("50.00")


def test_an_import_too_big_to_hold_in_memory_writes_as_it_goes_with_the_same_result(
    load, monkeypatch
):
    text = smi(*every("00:00:00", 7, 200, util=lambda n: float(n % 101)))
    load(text, "nvidia-smi", host="h")
    held = all_hours()
    GpuHour.objects.all().delete()

    monkeypatch.setattr(rollup, "FLUSH_AT", 2)
    monkeypatch.setattr(rollup, "GATHER_ROWS", 3)
    from apps.gpu.formats import nvidia_smi

    monkeypatch.setattr(nvidia_smi, "CHUNK_BYTES", 200)
    outcome = load(text, "nvidia-smi", host="h")

    assert outcome.samples == 200
    assert outcome.hours == len(held) == 24
    assert all_hours() == held


ON_POSTGRESQL = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


@pytest.mark.parametrize(
    "use_copy",
    [
        pytest.param(
            True, marks=pytest.mark.skipif(not ON_POSTGRESQL, reason="COPY is PostgreSQL's")
        ),
        False,
    ],
    ids=["copy", "orm"],
)
def test_the_copy_path_and_the_portable_path_write_the_same_hours(load, monkeypatch, use_copy):
    """PostgreSQL loads through COPY; SQLite (the demo) through the ORM. Both run here."""
    monkeypatch.setattr(services, "USE_COPY", use_copy)
    window_a = smi(*every("09:50:00", 5, 9))
    window_b = smi(*every("10:10:00", 5, 9))

    load(window_a, "nvidia-smi", host="h")
    load(window_b, "nvidia-smi", host="h")
    again = load(window_b, "nvidia-smi", host="h")

    assert again.samples == 0
    assert hour_values(U, "2026-07-14 09:00")["samples"] == 2
    # 10:00-10:30 from A (7); from B only 10:35-10:50 (4): its 10:10-10:30 were counted by A.
    ten = hour_values(U, "2026-07-14 10:00")
    assert ten["samples"] == 7 + 4
    assert ten["util_mean"] == pytest.approx(
        (20 + 30 + 40 + 50 + 60 + 70 + 80 + 50 + 60 + 70 + 80) / 11
    )


def test_an_import_announces_the_days_it_changed_and_a_repeat_nothing(load, monkeypatch):
    port = Port("spend data changed")
    heard = []
    port.register(lambda *, start, end, reason: heard.append((start, end, reason)))
    monkeypatch.setattr("apps.gpu.services.spend_data_changed", port)
    text = HEADER + "".join(  # two days: 23:50 on the 14th and 00:10 on the 15th
        f"{moment}.000, {U}, 50 %, 5000 MiB, 100 W\n"
        for moment in ("2026/07/14 23:50:00", "2026/07/15 00:10:00")
    )

    load(text, "nvidia-smi", host="h")
    load(text, "nvidia-smi", host="h")

    assert heard == [(date(2026, 7, 14), date(2026, 7, 16), "gpu_import")]
