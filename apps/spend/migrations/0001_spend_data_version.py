"""The spend data version: a counter bumped after the commit of each announced change, and on
PostgreSQL a sequence every write to the cost rollups moves (statement triggers), so that even a
write no port announced makes the cached figures computed afresh."""

from django.db import migrations, models

ROLLUPS = ("billing_dailycost", "billing_monthlycost", "billing_dailyresourcecost")

CREATE = [
    "CREATE SEQUENCE spend_rollup_writes",
    "CREATE FUNCTION spend_rollup_written() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM nextval('spend_rollup_writes'); RETURN NULL; END $$",
    *(
        f"CREATE TRIGGER spend_rollup_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
        f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION spend_rollup_written()"
        for table in ROLLUPS
    ),
]
DROP = [
    *(f"DROP TRIGGER IF EXISTS spend_rollup_written ON {table}" for table in ROLLUPS),
    "DROP FUNCTION IF EXISTS spend_rollup_written()",
    "DROP SEQUENCE IF EXISTS spend_rollup_writes",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite (the demo): the ports' version alone
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("billing", "0007_t17_delivery_usage_as_of"),
    ]

    operations = [
        migrations.CreateModel(
            name="SpendDataVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("value", models.PositiveBigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(_run(CREATE), _run(DROP)),
    ]
