"""The storage page's rollups (billing's DailyStorageSummary, MonthlyStorageSummary,
DailyStorageTotal and DailyBucketStorage) move the spend data version as the
other rollups do: a write no port announces still makes the next page compute afresh."""

from django.db import migrations

TABLES = (
    "billing_dailystoragesummary",
    "billing_monthlystoragesummary",
    "billing_dailystoragetotal",
    "billing_dailybucketstorage",
)


def _run(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite (the demo): the ports' version alone
        schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0002_storage_rollup_writes"),
        ("billing", "0014_storage_summary"),
    ]

    operations = [
        migrations.RunPython(
            _run(
                f"CREATE TRIGGER spend_rollup_written AFTER INSERT OR UPDATE OR DELETE OR "
                f"TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_written()"
            ),
            _run(f"DROP TRIGGER IF EXISTS spend_rollup_written ON {table}"),
        )
        for table in TABLES
    ]
