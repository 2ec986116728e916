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
