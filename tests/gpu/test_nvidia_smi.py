"""nvidia-smi --query-gpu CSV logs: every dialect rolls up to the same hand-computed hours."""

import pytest

from apps.gpu.formats import GpuMetricsError, nvidia_smi
from apps.gpu.models import Gpu, GpuHour

from .helpers import all_hours, hour_values

H100 = "NVIDIA H100 80GB HBM3"
A = "GPU-0a0a0a0a-1111-2222-3333-444444444444"
B = "GPU-0b0b0b0b-1111-2222-3333-444444444444"

# GPU A, 10:00-11:00: utilisation 0, 50, 100, 30; memory used 1000, 3000, 5000, 3000 MiB of 81559;
# power 70, 300, 690, 200 W. 11:00-12:00: one sample at 8%. GPU B, 10:00-11:00: 100% twice.
HEADER = (
    "timestamp, index, uuid, name, utilization.gpu [%], memory.total [MiB], memory.used [MiB], "
    "power.draw [W]"
)
WITH_UNITS = f"""\
{HEADER}
2026/07/14 10:00:00.000, 0, {A}, {H100}, 0 %, 81559 MiB, 1000 MiB, 70.00 W
2026/07/14 10:00:00.000, 1, {B}, {H100}, 100 %, 81559 MiB, 80000 MiB, 700.00 W
2026/07/14 10:15:00.000, 0, {A}, {H100}, 50 %, 81559 MiB, 3000 MiB, 300.00 W
2026/07/14 10:15:00.000, 1, {B}, {H100}, 100 %, 81559 MiB, 80000 MiB, 690.50 W
2026/07/14 10:30:00.000, 0, {A}, {H100}, 100 %, 81559 MiB, 5000 MiB, 690.00 W
2026/07/14 10:45:00.000, 0, {A}, {H100}, 30 %, 81559 MiB, 3000 MiB, 200.00 W
2026/07/14 11:00:00.000, 0, {A}, {H100}, 8 %, 81559 MiB, 1000 MiB, 80.00 W
"""

EXPECTED = {
    (A, "", "2026-07-14 10:00"): {
        "samples": 4,
        "util_samples": 4,
        "util_mean": 45.0,
        "util_max": 100.0,
        "idle_share": 0.25,
        "memory_used_mib": 3000.0,
        "memory_used_max_mib": 5000.0,
        "memory_total_mib": 81559.0,
        "power_watts": 315.0,
        "power_max_watts": 690.0,
    },
    (A, "", "2026-07-14 11:00"): {
        "samples": 1,
        "util_samples": 1,
        "util_mean": 8.0,
        "util_max": 8.0,
        "idle_share": 1.0,
        "memory_used_mib": 1000.0,
        "memory_used_max_mib": 1000.0,
        "memory_total_mib": 81559.0,
        "power_watts": 80.0,
        "power_max_watts": 80.0,
    },
    (B, "", "2026-07-14 10:00"): {
        "samples": 2,
        "util_samples": 2,
        "util_mean": 100.0,
        "util_max": 100.0,
        "idle_share": 0.0,
        "memory_used_mib": 80000.0,
        "memory_used_max_mib": 80000.0,
        "memory_total_mib": 81559.0,
        "power_watts": 695.25,
        "power_max_watts": 700.0,
    },
}


def nounits(text: str) -> str:
    for unit in (" MiB", " %", " W"):
        text = text.replace(unit + ",", ",").replace(unit + "\n", "\n")
    return text


def test_a_log_with_units_rolls_up_to_the_hand_computed_hours(load):
    outcome = load(WITH_UNITS, "nvidia-smi", host="train-node-1")

    assert all_hours() == EXPECTED
    assert (outcome.samples, outcome.gpus, outcome.hours) == (7, 2, 3)
    gpu = Gpu.objects.get(uuid=A)
    assert (gpu.host, gpu.index, gpu.model_name, gpu.mig_instance) == ("train-node-1", 0, H100, "")


def test_a_log_written_with_nounits_gives_the_same_hours(load):
    text = nounits(WITH_UNITS)
    assert "MiB," not in text.split("\n", 1)[1]  # the values really have no units

    load(text, "nvidia-smi", host="train-node-1")

    assert all_hours() == EXPECTED


def test_columns_in_any_order_with_extra_columns_give_the_same_hours(load):
    lines = WITH_UNITS.splitlines()
    header = [name.strip() for name in lines[0].split(",")]
    order = [7, 3, 2, 0, 6, 4, 5, 1]  # power, name, uuid, timestamp, used, util, total, index
    rows = [
        ", ".join([*(values[i] for i in order), "P0", "[N/A]", "00000000:18:00.0"])
        for values in ([value.strip() for value in line.split(",")] for line in lines[1:])
    ]
    text = ", ".join([*(header[i] for i in order), "pstate", "fan.speed [%]", "pci.bus_id"]) + "\n"
    text += "\n".join(rows) + "\n"

    load(text, "nvidia-smi", host="train-node-1")

    assert all_hours() == EXPECTED


def test_bracketed_tokens_are_missing_values_not_zeros(load):
    # An H100 in MIG mode reports no utilization.gpu; memory and power still count.
    RESET = "[GPU requires reset]"  # noqa: N806
    text = f"""\
timestamp, uuid, utilization.gpu [%], memory.total [MiB], memory.used [MiB], power.draw [W]
2026/07/14 10:00:00.000, {A}, [N/A], 81559 MiB, 1000 MiB, [Not Supported]
2026/07/14 10:30:00.000, {A}, [N/A], 81559 MiB, 3000 MiB, 100.00 W
2026/07/14 10:45:00.000, {A}, [Unknown Error], [Insufficient Permissions], 2000 MiB, {RESET}
"""
    load(text, "nvidia-smi", host="mig-node")

    row = hour_values(A, "2026-07-14 10:00")
    assert row["samples"] == 3
    assert (row["util_samples"], row["util_mean"], row["idle_share"]) == (0, None, None)
    assert row["memory_used_mib"] == 2000.0
    assert row["memory_total_mib"] == 81559.0
    assert (row["power_watts"], row["power_max_watts"]) == (100.0, 100.0)


def test_a_looping_log_with_the_header_again_and_blank_lines_counts_each_row_once(load):
    lines = WITH_UNITS.splitlines()
    # nvidia-smi -l appends blocks; a log rotated by hand may repeat the header; no final newline.
    text = "\n".join([lines[0], *lines[1:4], "", lines[0], *lines[4:], ""]).rstrip("\n")

    load(text, "nvidia-smi", host="train-node-1")

    assert all_hours() == EXPECTED


def test_timestamps_are_read_in_the_zone_the_log_was_written_in(load):
    # 12:00 in Berlin in July is 10:00 UTC.
    text = WITH_UNITS.replace("2026/07/14 10:", "2026/07/14 12:").replace(
        "2026/07/14 11:", "2026/07/14 13:"
    )

    load(text, "nvidia-smi", host="train-node-1", time_zone="Europe/Berlin")

    assert all_hours() == EXPECTED


def test_milliseconds_are_kept_so_two_readings_in_one_second_both_count(load):
    text = f"""\
timestamp, uuid, utilization.gpu [%]
2026/07/14 10:00:00.250, {A}, 20 %
2026/07/14 10:00:00.750, {A}, 40 %
2026/07/14 10:00:00.750, {A}, 90 %
"""
    load(text, "nvidia-smi", host="h")

    row = hour_values(A, "2026-07-14 10:00")
    # The repeated moment (.750) counts once: the first reading of it.
    assert (row["samples"], row["util_mean"], row["util_max"]) == (2, 30.0, 40.0)


def test_aliases_a_hostname_column_and_power_draw_average_are_understood(load):
    text = f"""\
timestamp, hostname, gpu_uuid, gpu_name, utilization.gpu [%], power.draw.average [W]
2026/07/14 10:00:00.000, box-7, {A}, NVIDIA L4, 60 %, 50.00 W
2026/07/14 10:10:00.000, box-7, {A}, NVIDIA L4, 20 %, 30.00 W
"""
    load(text, "nvidia-smi")

    gpu = Gpu.objects.get(uuid=A)
    assert (gpu.host, gpu.model_name) == ("box-7", "NVIDIA L4")
    row = hour_values(A, "2026-07-14 10:00")
    assert (row["util_mean"], row["power_watts"]) == (40.0, 40.0)


def test_a_log_split_across_many_reads_gives_the_same_hours(load, monkeypatch):
    monkeypatch.setattr(nvidia_smi, "CHUNK_BYTES", 97)  # cuts rows in the middle

    load(WITH_UNITS, "nvidia-smi", host="train-node-1")

    assert all_hours() == EXPECTED


def test_a_value_that_is_not_a_number_names_its_line_and_column(load, monkeypatch):
    monkeypatch.setattr(nvidia_smi, "CHUNK_BYTES", 120)
    text = WITH_UNITS.replace("30 %", "thirty %")

    with pytest.raises(GpuMetricsError) as error:
        load(text, "nvidia-smi", host="train-node-1", name="smi.csv")

    assert str(error.value).endswith(
        "smi.csv: line 7, column 'utilization.gpu [%]': 'thirty %' is not a number."
    )
    # Nothing of the file stays behind: not the hours before the bad line, not its GPUs.
    assert GpuHour.objects.count() == 0
    assert Gpu.objects.count() == 0


def test_a_row_with_a_value_missing_names_its_line(load):
    text = WITH_UNITS.replace(", 50 %, 81559 MiB", ", 50 %")

    with pytest.raises(GpuMetricsError) as error:
        load(text, "nvidia-smi", host="train-node-1", name="smi.csv")

    assert str(error.value).endswith(
        "smi.csv: line 4: expected 8 values separated by commas, found 7."
    )
    assert GpuHour.objects.count() == 0


def test_a_time_that_is_not_nvidia_smis_names_its_line(load):
    text = WITH_UNITS.replace("2026/07/14 10:30:00.000", "2026-07-14T10:30:00")

    with pytest.raises(GpuMetricsError) as error:
        load(text, "nvidia-smi", host="train-node-1", name="smi.csv")

    assert str(error.value).endswith(
        "smi.csv: line 6, column 'timestamp': '2026-07-14T10:30:00' is not a time like "
        "2026/07/14 08:12:53.353."
    )


def test_a_log_without_its_header_says_so(load):
    with pytest.raises(GpuMetricsError) as error:
        load(WITH_UNITS.split("\n", 1)[1], "nvidia-smi", host="h", name="smi.csv")

    assert "smi.csv: line 1: no nvidia-smi header" in str(error.value)
    assert "--format=csv,noheader" in str(error.value)


def test_rows_without_a_uuid_need_a_host_to_be_told_apart(load):
    text = "timestamp, index, utilization.gpu [%]\n2026/07/14 10:00:00.000, 0, 5 %\n"

    with pytest.raises(GpuMetricsError) as error:
        load(text, "nvidia-smi", name="smi.csv")
    assert "smi.csv: rows have no uuid and no hostname; say which host" in str(error.value)

    load(text, "nvidia-smi", host="old-box", name="smi.csv")
    assert Gpu.objects.get().uuid == "old-box/gpu0"
