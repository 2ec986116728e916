"""The storage rollup (billing's DailyStorageCost) moves the spend data version as the cost rollups
do: the storage page's figures are cached per data version too."""

from django.db import migrations

TABLE = "billing_dailystoragecost"


def _run(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite (the demo): the ports' version alone
        schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0001_spend_data_version"),
        ("billing", "0009_storage_rollup"),
    ]

    operations = [
        migrations.RunPython(
            _run(
                f"CREATE TRIGGER spend_rollup_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {TABLE} FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_written()"
            ),
            _run(f"DROP TRIGGER IF EXISTS spend_rollup_written ON {TABLE}"),
        )
    ]
