"""A real MLflow tracking server on loopback (sqlite backend in a temporary folder), started
once per test session from its own environment, .venv-mlflow (scripts/mlflow-venv makes it);
and MLflow's own client driven through that environment's Python."""

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MLFLOW_PYTHON = ROOT / ".venv-mlflow" / "bin" / "python"
OPS = Path(__file__).parent / "mlflow_ops.py"
START_SECONDS = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_url(tmp_path_factory):
    subprocess.run(["bash", str(ROOT / "scripts" / "mlflow-venv")], check=True, timeout=1200)
    folder = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = (folder / "server.log").open("wb")
    server = subprocess.Popen(
        [
            str(MLFLOW_PYTHON.parent / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--default-artifact-root",
            str(folder / "artifacts"),
        ],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(
                "the MLflow server did not start: " + (folder / "server.log").read_text()[-2000:]
            )
        time.sleep(0.5)
    yield url
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


class Mlflow:
    """MLflow's client, in the server's environment: `ops` runs a batch of operations."""

    def __init__(self, url: str) -> None:
        self.url = url

    def ops(self, *operations: dict) -> list:
        done = subprocess.run(
            [str(MLFLOW_PYTHON), str(OPS), self.url],
            input=json.dumps(list(operations)),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def tags(self, run_id: str) -> dict[str, str]:
        return self.ops({"op": "tags", "run_id": run_id})[0]


@pytest.fixture
def mlflow(mlflow_url) -> Mlflow:
    return Mlflow(mlflow_url)
