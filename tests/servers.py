"""Throwaway PostgreSQL and Redis servers for the fault tests that restart them mid-work: a
pytest plugin, registered in the root conftest. Never the shared servers on 5432 and 6379.

`throwaway_postgres` runs `initdb` and `pg_ctl` on a temporary data directory on a free port,
as the `postgres` OS user when the tests run as root (PostgreSQL refuses root; CI runs as root),
and copies the test database into a database of its own, as it is when the fixture starts, and
again whenever the test calls `copy_test_database` (after it wrote the rows the work needs).
`throwaway_redis` runs `redis-server` on a free port, without persistence. Both can be stopped,
killed and started again on the same port mid-test, and are stopped and removed at the end.
"""

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_TIMEOUT = 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for version in sorted(Path("/usr/lib/postgresql").glob("*"), reverse=True):
        if (version / "bin" / name).exists():
            return str(version / "bin" / name)
    pytest.skip(f"{name} is not installed (PostgreSQL's server binaries are needed)")


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL's server refuses to run as root: as root, run it as the `postgres` user."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass
class ThrowawayPostgres:
    directory: Path
    port: int
    database: str = "costsite_faults"
    log: Path = field(init=False)

    def __post_init__(self):
        self.log = self.directory / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def settings_dict(self, base: dict) -> dict:
        return {**base, "NAME": self.database, "HOST": "127.0.0.1", "PORT": str(self.port)}

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.directory / "data"), *args]),
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT + 10,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._pg_ctl("-o", options, "-l", str(self.log), "-w", "-t", str(START_TIMEOUT), "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends every session (as a restart does); `immediate` is a crash."""
        self._pg_ctl("-m", mode, "-w", "stop")

    def restart(self, down_for: float = 1.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()

    def query(self, sql: str, params: tuple = ()) -> list[tuple] | None:
        """Rows of one query on a connection of its own; None while the server does not answer.
        (Not through Django: the test case allows only the test databases' aliases.)"""
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as connection:
                return connection.execute(sql, params).fetchall()
        except psycopg.OperationalError:
            return None

    def copy_test_database(self, source: dict) -> None:
        """(Re)create the database as a copy of the test database as it is now, rows and all
        (`pg_dump`: a second or two, where migrating would take half a minute)."""
        psql = [_pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        subprocess.run(
            [*psql, "-d", "postgres", "-qc", f"DROP DATABASE IF EXISTS {self.database} (FORCE)"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        subprocess.run(
            [*psql, "-d", "postgres", "-qc", f"CREATE DATABASE {self.database}"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        dump = subprocess.run(
            [
                _pg_bin("pg_dump"),
                "--no-owner",
                "-h",
                source.get("HOST") or "127.0.0.1",
                "-p",
                str(source.get("PORT") or 5432),
                "-U",
                source.get("USER") or "postgres",
                source["NAME"],
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [*psql, "-d", self.database, "-q", "-v", "ON_ERROR_STOP=1"],
            input=dump.stdout,
            check=True,
            capture_output=True,
            timeout=120,
        )


@pytest.fixture
def throwaway_postgres(transactional_db):
    """A PostgreSQL server of the test's own, holding a copy of the test database."""
    from django.db import connection

    directory = Path(tempfile.mkdtemp(prefix="costsite-faults-pg-"))
    if os.geteuid() == 0:
        postgres = pwd.getpwnam("postgres")
        os.chown(directory, postgres.pw_uid, postgres.pw_gid)
    server = ThrowawayPostgres(directory=directory, port=free_port())
    subprocess.run(
        _as_postgres(
            [_pg_bin("initdb"), "-D", str(directory / "data"), "-U", "postgres", "-A", "trust"]
            + ["-E", "UTF8", "--no-sync", "--no-instructions"]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        server.start()
        server.copy_test_database(connection.settings_dict)
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already down
            server.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class ThrowawayRedis:
    directory: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            pytest.skip("redis-server is not installed")
        with (self.directory / "server.log").open("ab") as log:
            self.process = subprocess.Popen(
                [redis_server, "--port", str(self.port), "--bind", "127.0.0.1"]
                + ["--save", "", "--appendonly", "no", "--dir", str(self.directory)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                pytest.fail(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def kill(self) -> None:
        """A crash: what it held (queued and unacknowledged messages) is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def restart(self, down_for: float = 1.0) -> None:
        self.kill()
        time.sleep(down_for)
        self.start()


@pytest.fixture
def throwaway_redis():
    directory = Path(tempfile.mkdtemp(prefix="costsite-faults-redis-"))
    server = ThrowawayRedis(directory=directory, port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(directory, ignore_errors=True)
