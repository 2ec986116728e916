"""The storage page on SQLite (the quick start's database): a large bucket's month of byte-seconds
is beyond a 64-bit integer, which SQLite's SUM() refuses ("integer overflow")."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Two buckets of 100 PiB each for the last 10 days: 100 × 2^50 B × 86,400 s is
# 9.73e21 byte-seconds a bucket-day, so any sum of them overflows a 64-bit integer.
SETUP = """
import json
import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.test import Client

from apps.accounts.models import Organization
from apps.billing.loader import storage_summary_rebuild
from apps.billing.models import DailyStorageCost, Delivery
from apps.billing.storage import ByteSum
from tests.insights.conftest import make_delivery

org = Organization.get()
org.currency = "USD"
org.save()
delivery = make_delivery()
# The bill reaches today's midnight: yesterday is its last whole day, the page's last.
today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
Delivery.objects.filter(pk=delivery.pk).update(max_usage_period_end=today)
per_day = 100 * 2**50 * 86_400
for bucket in ("s3://a", "s3://b"):
    for i in range(10):
        DailyStorageCost.objects.create(
            delivery=delivery, day=date.today() - timedelta(days=10 - i), data_class="dataset",
            usage_class="object", resource_id=bucket, billing_currency="USD",
            effective_cost=Decimal("100.00"), billed_cost=Decimal("100.00"),
            stored_byte_seconds=per_day, moved_bytes=2**62, line_items=1,
        )
# What the import does after writing them: the page's rollups, whose sums overflow alike.
storage_summary_rebuild(delivery_id=delivery.pk)
total = DailyStorageCost.objects.aggregate(
    stored=ByteSum("stored_byte_seconds"), moved=ByteSum("moved_bytes")
)
staff = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
client = Client()
client.force_login(staff)
response = client.get("/storage/?days=30")
print(json.dumps({
    "status": response.status_code,
    "buckets_listed": all(b in response.content.decode() for b in ("s3://a", "s3://b")),
    "stored_now": re.search(r'id="stored-now">([^<]+)<', response.content.decode()).group(1),
    "stored_pib_days": str(round(total["stored"] / (2**50 * 86_400))),
    "moved_eib": str(round(total["moved"] / 2**60)),
}))
"""


def test_the_storage_page_sums_bytes_beyond_64_bits_on_sqlite(sqlite_database):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{sqlite_database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "DJANGO_DEBUG": "true",  # static files from the finders: no collected manifest here
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell"],
        cwd=ROOT,
        env=env,
        input=SETUP,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    # 2 buckets × 10 days × 100 PiB; 20 rows × 4 EiB moved.
    assert figures == {
        "status": 200,
        "buckets_listed": True,
        "stored_now": "200 PiB",  # the last day: both buckets, read from the page's rollup
        "stored_pib_days": "2000",
        "moved_eib": "80",
    }
