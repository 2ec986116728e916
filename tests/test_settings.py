"""Settings come from the environment, default to the demo, and the README documents them."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READERS = {"env", "env_bool", "env_list", "getenv", "get"}


def variables_settings_reads() -> set[str]:
    """Names given as literals to env(), env_bool(), env_list(), os.environ.get(), os.getenv()."""
    tree = ast.parse((ROOT / "costsite" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name == "get" and not (
            isinstance(func, ast.Attribute) and ast.unparse(func.value) == "os.environ"
        ):
            continue
        first = node.args[0]
        if name in READERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value)
    return names


def readme_variables() -> dict[str, str]:
    """The README's environment table: variable name -> its default column."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \| ([^|]*) \|", section, flags=re.MULTILINE)
    return {name: default.strip() for name, default in rows}


def test_the_readme_documents_every_variable_settings_reads_and_no_other():
    documented = set(readme_variables())
    read = variables_settings_reads()

    assert read - documented == set(), "add these to the README's table"
    assert documented - read == set(), "the README documents variables settings.py never reads"
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY", "LOG_LEVEL"} <= read


def test_without_any_variable_the_settings_are_the_demos():
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in variables_settings_reads() and key != "DJANGO_SETTINGS_MODULE"
    }
    probe = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps([settings.DEBUG, settings.DATABASES['default']['ENGINE'], "
        "str(settings.DATABASES['default']['NAME']), settings.CELERY_TASK_ALWAYS_EAGER, "
        "settings.EMAIL_BACKEND, settings.SESSION_COOKIE_SECURE]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env | {"DJANGO_SETTINGS_MODULE": "costsite.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        True,
        "django.db.backends.sqlite3",
        str(ROOT / "var" / "demo.sqlite3"),
        True,
        "django.core.mail.backends.console.EmailBackend",
        False,
    ]


GOOD_KEY = "k7Qm2xV9pL4sT8wZ1bN6cR3dF5gH0jY-aE_uI2oP9qW4eR7tY1uI3oP5aS8dF0gH"


def _production_settings(**variables: str) -> subprocess.CompletedProcess:
    """Imports the settings in a fresh process with debug off and only these variables set."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in variables_settings_reads() and key != "DJANGO_SETTINGS_MODULE"
    }
    return subprocess.run(
        [sys.executable, "-c", "import costsite.settings"],
        cwd=ROOT,
        env=env | {"DJANGO_DEBUG": "false", **variables},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_debug_a_missing_published_short_or_repeated_key_refuses_to_start():
    advice = (
        "; with DJANGO_DEBUG=false costsite needs a random key of at least 50 characters. "
        "Make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
    cases = {
        "": "not set",
        "demo-only-insecure-key-change-me-in-production": "a published default",
        "compose-default-secret-set-DJANGO_SECRET_KEY-in-production": "a published default",
        "x" * 49: "49 characters long (at least 50 are needed)",
        "ab" * 40: "not random",
        "django-insecure-" + GOOD_KEY: "not random",
    }
    for key, problem in cases.items():
        done = _production_settings(DJANGO_SECRET_KEY=key)
        assert done.returncode == 1, key
        last_line = done.stderr.strip().splitlines()[-1]
        assert last_line == (
            f"django.core.exceptions.ImproperlyConfigured: DJANGO_SECRET_KEY is {problem}{advice}"
        )
    assert _production_settings().returncode == 1  # not set at all
    assert _production_settings(DJANGO_SECRET_KEY=GOOD_KEY).returncode == 0


def _deploy_warnings(**variables: str) -> set[str]:
    env = {key: value for key, value in os.environ.items() if key not in variables_settings_reads()}
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env
        | {
            "DATABASE_URL": "sqlite:///:memory:",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": GOOD_KEY,
            **variables,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return set(re.findall(r"\((security\.W\d+)\)", done.stdout + done.stderr))


def test_check_deploy_has_no_https_warning_once_secure_cookies_are_on():
    # Plain HTTP (compose on localhost): the HTTPS settings are off, and check --deploy says so.
    plain_http = {"security.W004", "security.W008", "security.W012", "security.W016"}
    assert _deploy_warnings() == plain_http
    # Behind HTTPS: HSTS for a year and the redirect follow the cookies. What is left is by choice:
    # HSTS for every subdomain (W005) and the preload list (W021) are the company's to decide.
    assert _deploy_warnings(DJANGO_SECURE_COOKIES="true") == {"security.W005", "security.W021"}
    assert _deploy_warnings(
        DJANGO_SECURE_COOKIES="true", DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="true"
    ) == {"security.W021"}
    assert _deploy_warnings(DJANGO_SECURE_COOKIES="true", DJANGO_SECURE_SSL_REDIRECT="false") == {
        "security.W005",
        "security.W008",
        "security.W021",
    }
