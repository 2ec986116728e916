"""billing's MonthlyResourceCost moves the spend data version as the other rollups do: a write
no port announces (a repair of the table alone) still makes the next page compute afresh."""

from django.db import migrations

TABLE = "billing_monthlyresourcecost"


def _run(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite (the demo): the ports' version alone
        schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0006_version_parts"),
        ("billing", "0017_monthly_resource_cost"),
    ]

    operations = [
        migrations.RunPython(
            _run(
                f"CREATE TRIGGER spend_rollup_written AFTER INSERT OR UPDATE OR DELETE OR "
                f"TRUNCATE ON {TABLE} FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_written()"
            ),
            _run(f"DROP TRIGGER IF EXISTS spend_rollup_written ON {TABLE}"),
        )
    ]
