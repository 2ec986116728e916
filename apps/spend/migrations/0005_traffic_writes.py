"""deployments' TrafficHour moves the spend data version as the cost rollups do: the pages' parts
cached as HTML show a deployment's requests and its cost per 1,000 requests, and traffic is
recorded (the API, a pull from the serving stack) without any port announcing it."""

from django.db import migrations

TABLE = "deployments_traffichour"


def _run(statement):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite (the demo): the ports' version alone
        schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0004_project_cost_writes"),
        ("deployments", "0004_deployment_cold_start_seconds"),
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
