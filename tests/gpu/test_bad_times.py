"""Readings outside the plausible window (2000-01-01 to a day from now) fail the import, naming the
file and where in it; nothing of the file is kept. Every metric format, and the time given with
--at for a scrape without timestamps."""

from datetime import UTC, datetime

import pytest
import time_machine

from apps.gpu.formats import GpuMetricsError
from apps.gpu.models import Gpu, GpuHour

from .test_dcgm import scrape, series
from .test_nvidia_smi import WITH_UNITS
from .test_prometheus import labels, response

# The tests' clock: the window then ends at 2026-07-16 12:00 UTC.
TODAY = "2026-07-15T12:00:00Z"
WINDOW = "(from 2000-01-01 to 2026-07-16 12:00 UTC, a day from now)"


@pytest.fixture(autouse=True)
def _today():
    with time_machine.travel(TODAY, tick=False):
        yield


def refused(load, text, fmt, **options) -> str:
    with pytest.raises(GpuMetricsError) as error:
        load(text, fmt, **options)
    assert GpuHour.objects.count() == 0
    return str(error.value)


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        ("0001/01/01 00:00:00.000", "0001-01-01 00:00:00 UTC"),
        ("1999/12/31 23:59:59.000", "1999-12-31 23:59:59 UTC"),
        ("2026/07/17 00:00:00.000", "2026-07-17 00:00:00 UTC"),
        ("9999/12/31 23:59:59.000", "9999-12-31 23:59:59 UTC"),
    ],
)
def test_an_nvidia_smi_row_outside_the_window_names_its_line(load, moment, shown):
    text = WITH_UNITS.replace("2026/07/14 10:30:00.000", moment)

    assert refused(load, text, "nvidia-smi", host="node", name="smi.csv").endswith(
        f"smi.csv: line 6, column 'timestamp': {moment!r}: the time {shown} is outside the "
        f"plausible window for a reading {WINDOW}."
    )


@pytest.mark.parametrize(
    ("millis", "shown"),
    [
        ("-62135596800000", "0001-01-01 00:00:00 UTC"),
        ("253402300799000", "9999-12-31 23:59:59 UTC"),
        ("99999999999999999999", "1e+17 seconds since 1970"),
    ],
)
def test_a_dcgm_sample_with_a_timestamp_outside_the_window_names_its_line(load, millis, shown):
    text = scrape(
        [
            series("DCGM_FI_DEV_GPU_UTIL", "10") + " 1784023200000",
            series("DCGM_FI_DEV_GPU_UTIL", "20") + f" {millis}",
        ]
    )

    assert refused(load, text, "dcgm", name="scrape.txt").endswith(
        f"scrape.txt: line 2, the timestamp of DCGM_FI_DEV_GPU_UTIL: the time {shown} is "
        f"outside the plausible window for a reading {WINDOW}."
    )


def test_a_scrape_said_to_be_taken_in_year_one_is_refused(load):
    text = scrape([series("DCGM_FI_DEV_GPU_UTIL", "10")])

    message = refused(load, text, "dcgm", name="scrape.txt", taken_at=datetime(1, 1, 2, tzinfo=UTC))

    assert message.endswith(
        "scrape.txt: when it was taken (--at): the time 0001-01-02 00:00:00 UTC is outside "
        f"the plausible window for a reading {WINDOW}."
    )


@pytest.mark.parametrize(
    ("stamp", "shown"),
    [
        (-62135596800, "0001-01-01 00:00:00 UTC"),
        (253402300799, "9999-12-31 23:59:59 UTC"),
        (1e30, "1e+30 seconds since 1970"),
    ],
)
def test_a_prometheus_point_outside_the_window_names_its_series_and_point(load, stamp, shown):
    text = response(
        (labels("DCGM_FI_DEV_GPU_UTIL"), [[1784023200, "10"], [stamp, "20"]]),
    )

    assert refused(load, text, "prometheus-json", name="range.json").endswith(
        "range.json: series 1 DCGM_FI_DEV_GPU_UTIL{UUID=GPU-p1, Hostname=node-p}, point 2: "
        f"the time {shown} is outside the plausible window for a reading {WINDOW}."
    )
    assert Gpu.objects.count() == 0


def test_a_nul_byte_in_a_scrape_names_its_line(load):
    text = scrape([series("DCGM_FI_DEV_GPU_UTIL", "10") + " 1784023200000", "DCGM\x00_X 5"])

    assert refused(load, text, "dcgm", name="scrape.txt").endswith(
        "scrape.txt: line 2: holds a NUL byte (binary data, not Prometheus text)."
    )


def test_a_nul_in_a_prometheus_label_is_refused_before_the_database(load):
    text = response((labels("DCGM_FI_DEV_GPU_UTIL", uuid="GPU-\u0000"), [[1784023200, "10"]]))

    assert refused(load, text, "prometheus-json", name="range.json").endswith(
        "range.json: the GPU's uuid 'GPU-\\x00' holds a NUL byte (binary data, not text)."
    )
    assert Gpu.objects.count() == 0
