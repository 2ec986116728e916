"""docker-compose.yml as `docker-compose config` resolves it.

Debian's docker-compose validates a file without a Docker engine; `bash scripts/test` installs it.
"""

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import yaml
from django.conf import settings

from .test_settings import readme_variables

ROOT = Path(__file__).resolve().parent.parent
WORKERS = {
    "worker-imports": "imports",
    "worker-attribution": "attribution",
    "worker-insights": "insights",
    "worker-digests": "digests",
}
APP_SERVICES = ("web", *WORKERS, "beat")


@cache
def compose_config() -> dict:
    docker_compose = shutil.which("docker-compose")
    assert docker_compose, "docker-compose is not installed: run `bash scripts/test`"
    # Variables of the shell running the tests would be substituted into ${...}; keep them out.
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG"}}
    done = subprocess.run(
        [docker_compose, "-f", "docker-compose.yml", "config"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_compose_runs_postgres_redis_web_a_worker_per_queue_beat_and_mailpit():
    services = compose_config()["services"]

    assert sorted(services) == sorted(["beat", "mailpit", "postgres", "redis", "web", *WORKERS])
    assert services["postgres"]["image"].split(":")[1] in {"15", "16"}
    assert "gunicorn costsite.wsgi" in " ".join(services["web"]["command"])
    beat = services["beat"]["command"]
    assert beat[:4] == ["celery", "-A", "costsite", "beat"]
    assert "django_celery_beat.schedulers:DatabaseScheduler" in beat


def test_each_worker_service_consumes_one_queue_of_the_routing():
    services = compose_config()["services"]

    for name, queue in WORKERS.items():
        command = services[name]["command"]
        assert command[:4] == ["celery", "-A", "costsite", "worker"], name
        assert command[command.index("--queues") + 1] == queue, name
    assert sorted(WORKERS.values()) == sorted(settings.CELERY_TASK_QUEUES_BY_KIND)


def test_worker_services_scale_having_no_name_port_or_folder_of_their_own():
    services = compose_config()["services"]

    for name in WORKERS:
        assert "container_name" not in services[name], name
        assert "ports" not in services[name], name
        assert services[name]["volumes"] == services["web"]["volumes"], name


def test_web_migrates_and_collects_static_files_before_serving_without_debug():
    web = compose_config()["services"]["web"]
    command = " ".join(web["command"])

    assert command.index("migrate") < command.index("collectstatic") < command.index("gunicorn")
    assert web["environment"]["DJANGO_DEBUG"] == "false"
    assert "/health/" in " ".join(web["healthcheck"]["test"])


def test_worker_and_beat_share_the_web_image_environment_and_drop_folder():
    services = compose_config()["services"]
    web = services["web"]

    for name in (*WORKERS, "beat"):
        assert services[name]["image"] == web["image"] == "costsite:latest"
        assert services[name]["build"] == web["build"]
        assert services[name]["environment"] == web["environment"]
        assert services[name]["volumes"] == web["volumes"]
        assert services[name]["depends_on"] == {"web": {"condition": "service_healthy"}}


def test_the_bill_drop_folder_is_a_volume_at_costsite_data_dir():
    config = compose_config()
    web = config["services"]["web"]

    data_dir = web["environment"]["COSTSITE_DATA_DIR"]
    assert "bills" in config["volumes"]
    assert f"bills:{data_dir}:rw" in web["volumes"]


def test_the_app_waits_for_healthy_postgres_redis_and_mailpit():
    services = compose_config()["services"]

    assert services["web"]["depends_on"] == {
        name: {"condition": "service_healthy"} for name in ("postgres", "redis", "mailpit")
    }
    for name in ("postgres", "redis", "mailpit", "web", *WORKERS):
        assert services[name]["healthcheck"]["test"], f"{name} has no healthcheck"


def test_the_app_talks_to_the_compose_services():
    env = compose_config()["services"]["web"]["environment"]

    assert env["DATABASE_URL"] == "postgresql://costsite:costsite@postgres:5432/costsite"
    assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    assert env["CELERY_TASK_ALWAYS_EAGER"] == "false"
    assert (env["EMAIL_HOST"], env["EMAIL_PORT"]) == ("mailpit", "1025")
    assert env["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"


def test_every_variable_the_app_services_set_is_documented_in_the_readme():
    documented = set(readme_variables())
    services = compose_config()["services"]

    for name in APP_SERVICES:
        undocumented = set(services[name]["environment"]) - documented
        assert undocumented == set(), f"{name} sets variables the README does not document"
