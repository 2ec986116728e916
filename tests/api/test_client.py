"""clients/costsite_client.py against the live test server, and its retries against a loopback
server that fails on purpose."""

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts.services import api_token_create
from apps.experiments.models import Experiment, MetricPoint

CLIENT_FILE = Path(__file__).resolve().parents[2] / "clients" / "costsite_client.py"


def _load_client():
    # The client is a file to copy next to a training script, not a package: load it as one.
    spec = importlib.util.spec_from_file_location("costsite_client", CLIENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


costsite_client = _load_client()


def test_the_client_needs_only_the_standard_library():
    imported = {
        line.split()[1].split(".")[0]
        for line in CLIENT_FILE.read_text().splitlines()
        if line.startswith(("import ", "from "))
    }
    assert imported == {
        "__future__",
        "json",
        "logging",
        "math",
        "time",
        "urllib",
        "datetime",
        "typing",
    }


@pytest.fixture
def costsite(live_server, member, project):
    secret = api_token_create(user=member, name="training cluster").secret
    return costsite_client.Costsite(live_server.url, token=secret, backoff=0)


@pytest.mark.django_db(transaction=True)
def test_a_run_registered_by_the_client_shows_on_its_experiment_page(costsite, member, project):
    with costsite.run(
        "image-ranking",
        "ranker-v3-live",
        name="ranker v3 (live)",
        gpu_type="H100",
        gpu_count=8,
        resources=["i-0a1b2c3d4e5f67890", "vol-0feedbeef"],
        tags={"dataset": "products-2025"},
        flush_every=10,
    ) as run:
        experiment = Experiment.objects.get(external_id="ranker-v3-live")
        assert experiment.status == Experiment.Status.RUNNING
        for step in range(25):
            run.log_metrics(step * 100, loss=4.0 - step * 0.125, lr=0.001)
            if step == 9:
                # Ten points make a batch: sent, two values each.
                assert MetricPoint.objects.count() == 20
            if step == 14:
                assert MetricPoint.objects.count() == 20  # the next five wait in the buffer
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.SUCCEEDED
    assert experiment.ended_at is not None and experiment.started_at <= experiment.ended_at
    loss = list(
        MetricPoint.objects.filter(name="loss").order_by("step").values_list("step", "value")
    )
    assert len(loss) == 25
    assert (loss[0], loss[-1]) == ((0, 4.0), (2400, 1.0))

    browser = Client()
    browser.force_login(member)
    page = browser.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "ranker v3 (live)" in page
    assert '<span class="badge badge-succeeded">Succeeded</span>' in page
    assert "<code>i-0a1b2c3d4e5f67890</code>" in page
    assert "<code>vol-0feedbeef</code>" in page
    assert "8 × H100" in page
    figure = json.loads(
        page.split('<script id="metrics" type="application/json">')[1].split("</script>")[0]
    )
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert traces["loss"]["x"] == [step * 100 for step in range(25)]
    assert traces["loss"]["y"] == [4.0 - step * 0.125 for step in range(25)]
    assert traces["lr"]["visible"] == "legendonly"


@pytest.mark.django_db(transaction=True)
def test_an_exception_in_the_block_marks_the_run_failed_and_goes_on_up(costsite, project):
    with (
        pytest.raises(RuntimeError, match="CUDA out of memory"),
        costsite.run("image-ranking", "oom-run", flush_every=100) as run,
    ):
        run.log_metrics(1, loss=3.2)
        raise RuntimeError("CUDA out of memory")
    experiment = Experiment.objects.get(external_id="oom-run")
    assert experiment.status == Experiment.Status.FAILED
    assert list(experiment.metric_points.values_list("step", "value")) == [(1, 3.2)]


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_marks_the_run_stopped(costsite, project):
    with pytest.raises(KeyboardInterrupt), costsite.run("image-ranking", "interrupted"):
        raise KeyboardInterrupt
    assert Experiment.objects.get(external_id="interrupted").status == Experiment.Status.STOPPED


@pytest.mark.django_db(transaction=True)
def test_a_refusal_raises_with_the_servers_messages_and_is_not_retried(costsite, project):
    costsite.register_experiment("image-ranking", "done", status="succeeded")
    with pytest.raises(costsite_client.CostsiteError) as raised:
        costsite.register_experiment("image-ranking", "done", status="running")
    assert raised.value.status == 400
    assert raised.value.errors == {
        "status": [
            "Cannot change the status from succeeded to running: a succeeded run is finished. "
            "Register a retry as a new experiment with its own external_id."
        ]
    }
    assert str(raised.value).startswith(
        "PUT /projects/image-ranking/experiments/done answered 400: 1 field is invalid."
    )


@pytest.mark.django_db(transaction=True)
def test_non_finite_values_are_skipped_not_sent(costsite, project):
    with costsite.run("image-ranking", "diverged", flush_every=1) as run:
        run.log_metrics(1, loss=float("nan"), lr=0.1)
        run.log_metrics(2, loss=float("inf"))
    points = MetricPoint.objects.filter(experiment__external_id="diverged")
    assert list(points.values_list("name", "step")) == [("lr", 1)]


class Flaky(BaseHTTPRequestHandler):
    """Answers 503 to the first `failures` calls, then 200 with a JSON body."""

    failures = 2
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - the name http.server calls
        Flaky.seen.append(self.path)
        if len(Flaky.seen) <= Flaky.failures:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps([{"slug": "image-ranking"}]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_server():
    Flaky.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_5xx_answers_are_retried_until_one_succeeds(flaky_server):
    client = costsite_client.Costsite(flaky_server, token="cs_x", retries=3, backoff=0)
    assert client.projects() == [{"slug": "image-ranking"}]
    assert Flaky.seen == ["/api/v1/projects"] * 3


def test_it_gives_up_after_its_retries(flaky_server):
    client = costsite_client.Costsite(flaky_server, token="cs_x", retries=1, backoff=0)
    with pytest.raises(
        costsite_client.CostsiteError, match=r"answered 503 \(gave up after 2 tries\)"
    ):
        client.projects()
    assert len(Flaky.seen) == 2


def test_connection_errors_are_retried_and_then_reported(flaky_server):
    # A port nobody listens on: the server above, shut down.
    closed = costsite_client.Costsite("http://127.0.0.1:9", token="cs_x", retries=2, backoff=0)
    with pytest.raises(costsite_client.CostsiteError, match=r"gave up after 3 tries") as raised:
        closed.projects()
    assert raised.value.status is None


def test_metrics_that_cannot_be_sent_stay_buffered_and_the_training_goes_on(flaky_server):
    client = costsite_client.Costsite("http://127.0.0.1:9", token="cs_x", retries=0, backoff=0)
    run = costsite_client.Run(client, "image-ranking", "offline", flush_every=2)
    run.log_metrics(1, loss=2.0)
    run.log_metrics(2, loss=1.9)
    run.log_metrics(3, loss=1.8)
    assert [point["step"] for point in run.buffer] == [1, 2, 3]
    with pytest.raises(costsite_client.CostsiteError):
        run.finish()
