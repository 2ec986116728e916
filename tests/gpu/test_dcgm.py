"""dcgm-exporter /metrics text: label dialects, MIG, sentinels, and the hours they roll up to."""

import pytest

from apps.gpu.formats import GpuMetricsError
from apps.gpu.models import Gpu, GpuHour

from .helpers import at, hour_values

L4 = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"

# Verbatim from a real scrape (dcgm-exporter 4.x, driver 580.105.08, NVIDIA L4).
REAL_LABELS = (
    f'gpu="0",UUID="{L4}",pci_bus_id="00000000:31:00.0",device="nvidia0",modelName="NVIDIA L4",'
    'Hostname="i-030791dc5a37cd257",DCGM_FI_DRIVER_VERSION="580.105.08"'
)
REAL_SCRAPE = f"""\
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{REAL_LABELS}}} 16.365000
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{REAL_LABELS}}} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{REAL_LABELS}}} 0
# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{REAL_LABELS}}} 0.000000
"""


def scrape(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def series(metric: str, value: str, **labels: str) -> str:
    labels = {"gpu": "0", "UUID": L4, "modelName": "NVIDIA L4", "Hostname": "node-a", **labels}
    text = ",".join(f'{key}="{val}"' for key, val in labels.items() if val is not None)
    return f"{metric}{{{text}}} {value}"


def test_a_real_scrape_is_one_sample_of_its_gpu_at_the_time_it_was_taken(load):
    outcome = load(REAL_SCRAPE, "dcgm", taken_at=at("2026-07-14 08:12:53"))

    assert (outcome.samples, outcome.gpus, outcome.hours) == (1, 1, 1)
    gpu = Gpu.objects.get()
    assert (gpu.uuid, gpu.host, gpu.index, gpu.model_name) == (
        L4,
        "i-030791dc5a37cd257",
        0,
        "NVIDIA L4",
    )
    assert hour_values(L4, "2026-07-14 08:00") == {
        "samples": 1,
        "util_samples": 1,
        "util_mean": 0.0,
        "util_max": 0.0,
        "idle_share": 1.0,
        "memory_used_mib": 0.0,
        "memory_used_max_mib": 0.0,
        "memory_total_mib": None,  # FB_FREE is not in this scrape
        "power_watts": 16.365,
        "power_max_watts": 16.365,
    }


def test_scrapes_through_an_hour_average_and_the_engine_ratio_beats_gpu_util(load):
    # GR_ENGINE_ACTIVE is a 0-1 ratio; where a GPU reports it, it is the utilisation, and the
    # coarse GPU_UTIL (100 whenever any kernel runs) is not counted on top.
    for minute, engine, used, free, reserved in (
        ("10:00", "0.250000", "1000", "80080", "479"),
        ("10:20", "0.750000", "3000", "78080", "479"),
        ("10:40", "0.050000", "2000", "79080", "479"),
    ):
        load(
            scrape(
                [
                    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", engine),
                    series("DCGM_FI_DEV_GPU_UTIL", "100"),
                    series("DCGM_FI_DEV_FB_USED", used),
                    series("DCGM_FI_DEV_FB_FREE", free),
                    series("DCGM_FI_DEV_FB_RESERVED", reserved),
                ]
            ),
            "dcgm",
            taken_at=at(f"2026-07-14 {minute}"),
        )

    row = hour_values(L4, "2026-07-14 10:00")
    assert row["samples"] == 3
    assert row["util_samples"] == 3
    assert row["util_mean"] == pytest.approx(35.0)  # (25 + 75 + 5) / 3
    assert row["util_max"] == 75.0
    assert row["idle_share"] == pytest.approx(1 / 3)  # 5% is under the 10% threshold
    assert row["memory_used_mib"] == 2000.0
    assert row["memory_total_mib"] == 81559.0  # used + free + reserved


def test_the_lower_case_hostname_label_of_newer_exporters_names_the_host(load):
    load(
        scrape([series("DCGM_FI_DEV_GPU_UTIL", "40", Hostname=None, hostname="node-b")]),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    assert Gpu.objects.get().host == "node-b"


def test_labels_prometheus_renamed_name_the_workload_and_the_exporter_pod_does_not(load):
    load(
        scrape(
            [
                series(
                    "DCGM_FI_DEV_GPU_UTIL",
                    "90",
                    exported_pod="train-0",
                    exported_namespace="ml",
                    pod="nvidia-dcgm-exporter-x7k2p",
                    namespace="gpu-operator",
                    instance="10.0.0.7:9400",
                    instance_id="i-0abc1234",
                ),
                series(
                    "DCGM_FI_DEV_GPU_UTIL",
                    "0",
                    gpu="1",
                    UUID="GPU-idle",
                    pod="nvidia-dcgm-exporter-x7k2p",
                    namespace="gpu-operator",
                ),
            ]
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    busy = Gpu.objects.get(uuid=L4)
    assert (busy.workload, busy.resource_label) == ("ml/train-0", "i-0abc1234")
    assert Gpu.objects.get(uuid="GPU-idle").workload == ""


def test_mig_instances_are_gpus_of_their_own_under_the_physical_one(load):
    profile = {"modelName": "NVIDIA H100 80GB HBM3", "UUID": "GPU-h100"}
    outcome = load(
        scrape(
            [
                series(
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                    "0.800000",
                    GPU_I_PROFILE="3g.40gb",
                    GPU_I_ID="1",
                    **profile,
                ),
                series(
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                    "0.020000",
                    GPU_I_PROFILE="4g.40gb",
                    GPU_I_ID="2",
                    **profile,
                ),
                series(
                    "DCGM_FI_DEV_FB_USED", "20000", GPU_I_PROFILE="3g.40gb", GPU_I_ID="1", **profile
                ),
            ]
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    physical = Gpu.objects.get(uuid="GPU-h100", mig_instance="")
    first, second = Gpu.objects.filter(parent=physical).order_by("mig_instance")
    assert (first.mig_instance, first.mig_profile, first.share) == ("1", "3g.40gb", 3 / 7)
    assert (second.mig_instance, second.mig_profile, second.share) == ("2", "4g.40gb", 4 / 7)
    assert hour_values("GPU-h100", "2026-07-14 10:00", mig="1")["util_mean"] == 80.0
    assert hour_values("GPU-h100", "2026-07-14 10:00", mig="2")["idle_share"] == 1.0
    assert not GpuHour.objects.filter(gpu=physical).exists()
    # One physical GPU; its instances are two GPU-hours of one GPU's hour.
    assert (outcome.gpus, outcome.hours) == (1, 1)


def test_dcgm_blank_sentinels_are_missing_values(load):
    load(
        scrape(
            [
                series("DCGM_FI_DEV_GPU_UTIL", "9223372036854775794"),  # NOT_SUPPORTED
                series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "140737488355328.0"),  # FP64 blank
                series("DCGM_FI_DEV_FB_USED", "1234"),
                series("DCGM_FI_DEV_POWER_USAGE", "NaN"),
            ]
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    row = hour_values(L4, "2026-07-14 10:00")
    assert (row["samples"], row["util_samples"], row["util_mean"]) == (1, 0, None)
    assert (row["memory_used_mib"], row["power_watts"]) == (1234.0, None)


def test_the_old_exporters_lower_case_names_are_read(load):
    load(
        scrape(
            [
                'dcgm_gpu_utilization{gpu="0",uuid="GPU-old",Hostname="r6i3n0"} 64',
                'dcgm_fb_used{gpu="0",uuid="GPU-old",Hostname="r6i3n0"} 512',
            ]
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    row = hour_values("GPU-old", "2026-07-14 10:00")
    assert (row["util_mean"], row["memory_used_mib"]) == (64.0, 512.0)


def test_a_series_with_its_own_timestamp_is_taken_at_that_time(load):
    load(
        scrape([series("DCGM_FI_DEV_GPU_UTIL", "70") + " 1784023200000"]),  # 2026-07-14 10:00 UTC
        "dcgm",
        taken_at=at("2026-07-15 00:00"),
    )

    assert hour_values(L4, "2026-07-14 10:00")["util_mean"] == 70.0


def test_a_scrape_without_hostname_takes_the_host_it_is_given_or_says_it_needs_one(load):
    text = scrape([series("DCGM_FI_DEV_GPU_UTIL", "12", Hostname=None)])

    with pytest.raises(GpuMetricsError) as error:
        load(text, "dcgm", taken_at=at("2026-07-14 10:00"), name="scrape.prom")
    assert str(error.value).endswith(
        "scrape.prom: line 1: DCGM_FI_DEV_GPU_UTIL names no Hostname label; say which host it "
        "is (--host, or the source's host)."
    )

    load(text, "dcgm", taken_at=at("2026-07-14 10:00"), host="node-9", name="scrape.prom")
    assert Gpu.objects.get().host == "node-9"


def test_a_malformed_line_is_named_and_nothing_is_kept(load):
    text = scrape(
        [
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
            "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
            series("DCGM_FI_DEV_GPU_UTIL", "12"),
            series("DCGM_FI_DEV_GPU_UTIL", "12", gpu="1", UUID="GPU-2").replace("} 12", " 12"),
        ]
    )

    with pytest.raises(GpuMetricsError) as error:
        load(text, "dcgm", taken_at=at("2026-07-14 10:00"), name="scrape.prom")

    assert "scrape.prom: line 4: not Prometheus text format" in str(error.value)
    assert "DCGM_FI_DEV_GPU_UTIL{gpu=" in str(error.value)
    assert Gpu.objects.count() == 0
    assert GpuHour.objects.count() == 0


def test_a_file_without_any_gpu_metric_says_what_it_looked_for(load):
    with pytest.raises(GpuMetricsError) as error:
        load("# HELP up Up.\n# TYPE up gauge\nup 1\n", "dcgm", taken_at=at("2026-07-14 10:00"))

    assert "no dcgm-exporter GPU metrics in it (looked for DCGM_FI_PROF_GR_ENGINE_ACTIVE" in str(
        error.value
    )
