"""Record the SQL each spend page runs, to compare a refactoring's before and after.

    PAGE_SQL_OUT=/tmp/before.json .venv/bin/pytest bench/page_sql.py -q -p no:randomly
    ... change the code ...
    PAGE_SQL_OUT=/tmp/after.json .venv/bin/pytest bench/page_sql.py -q -p no:randomly
    diff /tmp/before.json /tmp/after.json   # nothing: every page runs the same queries

It loads the attribution tests' bill (tests/attribution/conftest.py) with every sequence reset
first, so ids, and with them the SQL text, are the same from run to run; then it captures, for
each page and its htmx partial, as staff and as a team lead, the count and text of its queries.
"""

import json
import os
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.attribution.conftest import *  # noqa: F403 (the bill and its fixtures)
from tests.conftest import *  # noqa: F403 (users, teams and their clients)
from tests.conftest import _fast_and_self_contained  # noqa: F401 (autouse: no manifest)

HTMX = {"HX-Request": "true", "HX-Target": "spend"}
# What differs between two runs of the same code: the session's key and server cursors' names.
VOLATILE = [
    (re.compile(r"session_key\" = '[a-z0-9]+'"), "session_key\" = '<session>'"),
    (re.compile(r"_django_curs_\d+_sync_\d+"), "<cursor>"),
]


def _stable(sql: str) -> str:
    for pattern, replacement in VOLATILE:
        sql = pattern.sub(replacement, sql)
    return sql


@pytest.fixture
def fresh_sequences(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")
        for (name,) in cursor.fetchall():
            cursor.execute("SELECT setval(%s, 1, false)", [name])


def pages(bill) -> list[str]:
    return [
        reverse("home"),
        reverse("home") + "?preset=12m",
        reverse("project_detail", args=["image-ranking"]),
        reverse("model_detail", args=[bill.ranker.pk]),
        reverse("experiment_detail", args=[bill.resnet.pk]),
        reverse("deployment_detail", args=[bill.ranker_prod.pk]),
        reverse("unattributed"),
        reverse("overview_export"),
        reverse("unattributed_export"),
        reverse("project_spend_export", args=["image-ranking"]),
        reverse("model_spend_export", args=[bill.ranker.pk]),
        reverse("experiment_spend_export", args=[bill.resnet.pk]),
        reverse("deployment_spend_export", args=[bill.ranker_prod.pk]),
        reverse("unattributed_claim") + "?resource_id=vol-0001",
    ]


def _queries(client, url: str, **headers) -> dict:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, headers=headers)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    return {"status": response.status_code, "sql": [_stable(q["sql"]) for q in captured]}


@pytest.mark.django_db
def test_record_page_sql(fresh_sequences, request):
    out = os.environ.get("PAGE_SQL_OUT")
    if not out:
        pytest.skip("set PAGE_SQL_OUT to the file to write")
    record = {}
    bill = request.getfixturevalue("bill")
    for who in ("staff", "lead"):
        client = request.getfixturevalue(f"{who}_client")
        for url in pages(bill):
            record[f"{who} {url}"] = _queries(client, url)
            record[f"{who} {url} (htmx)"] = _queries(client, url, **HTMX)
    with open(out, "w") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
    print({key: (value["status"], len(value["sql"])) for key, value in record.items()})
