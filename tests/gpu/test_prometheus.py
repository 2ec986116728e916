"""Prometheus query_range responses: read whole or streamed, NaN and Inf as missing, errors that
say where.

Every test runs three ways, so all say the same: with the response read whole, its points read
as columns by Arrow where they are written as Prometheus writes them (what a response up to
WHOLE_LIMIT gets); read whole with every point decoded by msgspec (what other writing gets);
and streamed by ijson (a larger response). The responses are written compactly, as Prometheus
writes them.
"""

import json
import tempfile

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.gpu.formats import GpuMetricsError, ParseContext, prometheus
from apps.gpu.models import Gpu, GpuHour

from .helpers import at, hour_values

T10 = int(at("2026-07-14 10:00").timestamp())


def labels(metric: str, uuid: str = "GPU-p1", **extra) -> dict:
    return {
        "__name__": metric,
        "UUID": uuid,
        "gpu": "0",
        "Hostname": "node-p",
        "modelName": "NVIDIA A100-SXM4-40GB",
        "instance": "10.0.0.7:9400",
        "job": "nvidia-dcgm-exporter",
        **extra,
    }


def response(*series: tuple[dict, list]) -> str:
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [{"metric": meta, "values": values} for meta, values in series],
            },
        },
        separators=(",", ":"),
    )


def points(*pairs: tuple[int, str]) -> list:
    return [[T10 + offset, value] for offset, value in pairs]


@pytest.fixture(autouse=True, params=["whole", "decoded", "streamed"])
def read_as(request, monkeypatch) -> str:
    if request.param == "decoded":
        monkeypatch.setattr(prometheus, "_points_columns", lambda raw: None)
    if request.param == "streamed":
        monkeypatch.setattr(prometheus, "WHOLE_LIMIT", 0)
    return request.param


def test_a_response_at_the_limit_is_read_whole_and_one_byte_past_it_streamed(load, monkeypatch):
    text = response(
        (labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20"), (900, "40"), (1800, "NaN"))),
        (labels("DCGM_FI_DEV_FB_USED"), points((0, "1024"), (900, "2048"))),
    )
    decoded = []
    whole_series = prometheus._whole_series
    monkeypatch.setattr(
        prometheus, "_whole_series", lambda data: decoded.append(len(data)) or whole_series(data)
    )
    seen = []
    for limit in (len(text), len(text) - 1):
        monkeypatch.setattr(prometheus, "WHOLE_LIMIT", limit)
        GpuHour.objects.all().delete()
        outcome = load(text, "prometheus-json", name="pull.json")
        row = hour_values("GPU-p1", "2026-07-14 10:00")
        seen.append((outcome.samples, row["samples"], row["util_mean"], row["memory_used_max_mib"]))

    assert decoded == [len(text)]  # once, at the limit; the larger response was streamed
    assert seen == [(2, 2, 30.0, 2048.0), (2, 2, 30.0, 2048.0)]  # the NaN moment has no reading


def test_a_response_rolls_up_each_series_into_its_gpus_hours(load):
    text = response(
        (
            labels("DCGM_FI_DEV_GPU_UTIL"),
            points((0, "20"), (900, "40"), (1800, "NaN"), (2700, "90"), (3600, "5")),
        ),
        (
            labels("DCGM_FI_DEV_GPU_UTIL", uuid="GPU-p2", gpu="1"),
            points((0, "+Inf"), (900, "-Inf"), (1800, "60")),
        ),
    )

    outcome = load(text, "prometheus-json")

    assert (outcome.samples, outcome.gpus, outcome.hours) == (5, 2, 3)
    first = hour_values("GPU-p1", "2026-07-14 10:00")
    assert (first["samples"], first["util_mean"], first["util_max"]) == (3, 50.0, 90.0)
    assert first["idle_share"] == 0.0
    assert hour_values("GPU-p1", "2026-07-14 11:00")["idle_share"] == 1.0
    second = hour_values("GPU-p2", "2026-07-14 10:00")
    assert (second["samples"], second["util_mean"]) == (1, 60.0)  # the infinities are missing


def test_responses_of_one_pull_complete_each_others_hours(load, write, organization):
    from apps.gpu import services

    responses = {
        "util.json": response((labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "30"), (60, "50")))),
        "used.json": response((labels("DCGM_FI_DEV_FB_USED"), points((0, "1000"), (60, "3000")))),
        "free.json": response((labels("DCGM_FI_DEV_FB_FREE"), points((0, "39960"), (60, "37960")))),
        "power.json": response(
            (labels("DCGM_FI_DEV_POWER_USAGE"), points((0, "100.5"), (60, "200.5")))
        ),
    }
    paths = [write(name, text) for name, text in responses.items()]

    outcome = services.gpu_metrics_load(
        inputs=[
            services.MetricInput(
                name=str(path),
                format="prometheus-json",
                open=lambda path=path: open(path, "rb"),  # noqa: SIM115
            )
            for path in paths
        ]
    )

    # Two readings of one GPU, whatever metrics each carried.
    assert (outcome.samples, outcome.gpus, outcome.hours) == (2, 1, 1)
    assert hour_values("GPU-p1", "2026-07-14 10:00") == {
        "samples": 2,
        "util_samples": 2,
        "util_mean": 40.0,
        "util_max": 50.0,
        "idle_share": 0.0,
        "memory_used_mib": 2000.0,
        "memory_used_max_mib": 3000.0,
        "memory_total_mib": 40960.0,  # mean used + mean free
        "power_watts": 150.5,
        "power_max_watts": 200.5,
    }


def test_the_engine_ratio_is_scaled_to_percent_and_unknown_metrics_are_skipped(load):
    text = response(
        (labels("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), points((0, "0.125"), (60, "0.375"))),
        (labels("DCGM_FI_DEV_GPU_TEMP"), points((0, "61"), (60, "62"))),
    )

    load(text, "prometheus-json")

    row = hour_values("GPU-p1", "2026-07-14 10:00")
    assert (row["samples"], row["util_mean"]) == (2, 25.0)


def test_an_error_response_is_reported_with_prometheus_reason(load):
    text = json.dumps(
        {"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"}
    )

    with pytest.raises(GpuMetricsError) as error:
        load(text, "prometheus-json", name="pull.json")

    assert str(error.value).endswith(
        "pull.json: Prometheus answered with an error (bad_data: exceeded maximum resolution)."
    )


def test_an_instant_query_is_refused_with_what_to_save_instead(load):
    text = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})

    with pytest.raises(GpuMetricsError) as error:
        load(text, "prometheus-json", name="instant.json")

    assert "instant.json: resultType is 'vector'; save a query_range response" in str(error.value)


def test_json_that_breaks_off_names_the_line_and_column(load):
    broken = (
        '{"status": "success", "data": {"resultType": "matrix", "result": [\n'
        '{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "UUID": "GPU-p1", "Hostname": "n"},\n'
        ' "values": [[1784023200, "20"], [1784023260 "40"]]}\n'
        "]}}\n"
    )

    with pytest.raises(GpuMetricsError) as error:
        load(broken, "prometheus-json", name="broken.json")

    assert str(error.value).endswith(
        "broken.json: line 3, column 45: not valid JSON (parse error: "
        "after array element, I expect ',' or ']')."
    )
    assert GpuHour.objects.count() == 0


def test_a_response_cut_short_says_so(load):
    good = response((labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20"), (60, "40"))))

    with pytest.raises(GpuMetricsError) as error:
        load(good[: len(good) // 2 + 40], "prometheus-json", name="cut.json")

    assert "cut.json: at the end: not valid JSON (it stops in the middle of the JSON" in str(
        error.value
    )
    assert Gpu.objects.count() == 0


def test_a_value_that_is_not_a_number_names_its_series_and_point(load):
    text = response(
        (labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20"))),
        (labels("DCGM_FI_DEV_GPU_UTIL", uuid="GPU-p2"), points((0, "20"), (60, "lots"))),
    )

    with pytest.raises(GpuMetricsError) as error:
        load(text, "prometheus-json", name="pull.json")

    assert str(error.value).endswith(
        "pull.json: series 2 DCGM_FI_DEV_GPU_UTIL{UUID=GPU-p2, Hostname=node-p}, point 2: "
        "the value 'lots' is not a number."
    )
    assert GpuHour.objects.count() == 0


def test_a_series_without_a_name_cannot_be_told_which_metric_it_is(load):
    meta = labels("DCGM_FI_DEV_GPU_UTIL")
    del meta["__name__"]

    with pytest.raises(GpuMetricsError) as error:
        load(response((meta, points((0, "1")))), "prometheus-json", name="expr.json")

    assert "expr.json: series 1: has no __name__ label" in str(error.value)


def test_text_that_is_no_prometheus_response_says_what_was_expected(load):
    with pytest.raises(GpuMetricsError) as error:
        load('{"hello": "world"}', "prometheus-json", name="other.json")

    assert "other.json: not a Prometheus query_range response" in str(error.value)


def test_a_series_without_hostname_is_on_the_host_of_its_scrape_target(load):
    meta = labels("DCGM_FI_DEV_GPU_UTIL", instance="10.0.0.7:9400")
    del meta["Hostname"]

    load(response((meta, points((0, "1")))), "prometheus-json")

    assert Gpu.objects.get().host == "10.0.0.7"


def test_the_stored_gpus_of_a_host_are_read_in_one_query(load):
    text = response(
        *(
            (labels("DCGM_FI_DEV_GPU_UTIL", uuid=f"GPU-h{n}", gpu=str(n)), points((0, "50")))
            for n in range(4)
        ),
        (labels("DCGM_FI_DEV_GPU_UTIL", uuid="GPU-elsewhere", Hostname="node-q"), points((0, "5"))),
    )
    load(text, "prometheus-json", name="first.json")

    with CaptureQueriesContext(connection) as queries:
        outcome = load(text.replace(f"{T10}", f"{T10 + 3600}"), "prometheus-json")

    sql = [query["sql"] for query in queries]
    by_host = [text for text in sql if 'FROM "gpu_gpu" WHERE "gpu_gpu"."host" =' in text]
    one_by_one = [text for text in sql if '"gpu_gpu"."uuid" =' in text]
    assert outcome.gpus == 5
    assert (len(by_host), one_by_one) == (2, [])  # node-p's four GPUs at once, node-q's one
    assert Gpu.objects.filter(host="node-p").count() == 4


@pytest.mark.parametrize(
    ("placeholder", "bad", "expected"),
    [
        (b'"GPU-BAD"', b'"GPU-\xff"', "lexical error: invalid bytes in UTF8 string."),
        (
            b"1234567890",
            b"1e400",
            "not valid JSON (parse error: numeric (floating point) overflow).",
        ),
        (b"1234567890", b"9" * 400, "not valid JSON (parse error: integer overflow)."),
    ],
    ids=["invalid UTF-8 in a label", "a time past any double", "a time of 400 digits"],
)
def test_bytes_or_numbers_no_parser_takes_in_a_later_series_say_where_they_are(
    load, placeholder, bad, expected
):
    text = response(
        (labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20"))),
        (labels("DCGM_FI_DEV_GPU_UTIL", uuid="GPU-BAD"), [[1234567890, "1"]]),
    ).encode()

    with pytest.raises(GpuMetricsError) as error:
        load(text.replace(placeholder, bad), "prometheus-json", name="pull.json")

    message = str(error.value)
    assert "pull.json: near byte " in message
    assert expected in message
    assert not GpuHour.objects.exists()


def test_a_pulled_response_spooled_in_memory_is_read_whole_without_going_to_disk():
    text = response((labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20"), (900, "40"))))
    with tempfile.SpooledTemporaryFile(max_size=1 << 20) as spool:  # as a pull spools its answer
        spool.write(text.encode())
        spool.seek(0)

        context = ParseContext(name="pull", gpu_id=lambda _: 7)
        batches = [
            (b.gpu.tolist(), b.ts.tolist()) for b in prometheus.parse(spool, context=context)
        ]

        assert batches == [([7, 7], [T10, T10 + 900])]
        assert not spool._rolled  # asking it for a file descriptor would have written it out


def test_a_gpu_seen_on_another_host_is_the_same_gpu_moved_there(load):
    load(response((labels("DCGM_FI_DEV_GPU_UTIL"), points((0, "20")))), "prometheus-json")
    moved = labels("DCGM_FI_DEV_GPU_UTIL", Hostname="node-q", gpu="3")
    moved["modelName"] = "NVIDIA A100-SXM4-80GB"

    load(response((moved, points((3600, "40")))), "prometheus-json", name="later.json")

    gpu = Gpu.objects.get()
    assert (gpu.uuid, gpu.host, gpu.index, gpu.model_name) == (
        "GPU-p1",
        "node-q",
        3,
        "NVIDIA A100-SXM4-80GB",
    )
    assert GpuHour.objects.filter(gpu=gpu).count() == 2
