"""An S3-compatible server on loopback for the bucket sources' tests: moto in server mode.

Import the fixtures where they are needed (`from tests.conftest_s3 import s3, s3_server`). The
server lives for the session; each test gets its own bucket and the credentials in its
environment (boto3's usual chain, as in production). moto keeps its buckets in the process, so a
server stopped and started again on the same port finds them as they were: that is how a test
takes the bucket down and brings it back.
"""

import itertools
import logging
import socket
from dataclasses import dataclass

import boto3
import pytest
from moto.server import ThreadedMotoServer

_buckets = itertools.count(1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    def __init__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: ThreadedMotoServer | None = None

    def start(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@pytest.fixture(scope="session")
def s3_server():
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = S3Server()
    server.start()
    yield server
    server.stop()


@dataclass
class Bucket:
    server: S3Server
    name: str
    client: object

    def put(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=body)


@pytest.fixture
def s3(s3_server, monkeypatch):
    """A fresh bucket on the loopback server, and credentials in the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "costsite-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "costsite-test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    client = boto3.client("s3", endpoint_url=s3_server.url, region_name="us-east-1")
    name = f"bills-{next(_buckets)}"
    client.create_bucket(Bucket=name)
    yield Bucket(server=s3_server, name=name, client=client)
    if s3_server._server is None:  # a test left it down
        s3_server.start()
