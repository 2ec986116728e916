"""What a recompute's refresh reads of each finding's days outside its period (FindingDayHours,
FindingDayOwner), filled from the hours already there by the recompute's own rebuild
(apps/insights/days.py)."""

import django.db.models.deletion
from django.db import migrations, models


def lives_fill(apps, schema_editor):
    """The days of the hours already there (PostgreSQL, where the recompute keeps them): a
    recompute's refresh reads the days outside its period from here from now on."""
    if schema_editor.connection.vendor == "postgresql":
        from apps.insights.days import lives_rebuild

        with schema_editor.connection.cursor() as cursor:
            lives_rebuild(cursor, start=None, end=None)


class Migration(migrations.Migration):
    dependencies = [
        ("insights", "0012_finding_visible_idx"),
    ]

    operations = [
        migrations.CreateModel(
            name="FindingDayHours",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("currency", models.CharField(max_length=10)),
                ("measured", models.BooleanField()),
                ("hours", models.PositiveIntegerField(help_text="Distinct hours.")),
                ("spend", models.DecimalField(decimal_places=15, max_digits=38)),
                ("wasted", models.DecimalField(decimal_places=15, max_digits=38)),
                (
                    "first_wasted",
                    models.DateTimeField(help_text="First hour with something wasted.", null=True),
                ),
                ("last_wasted", models.DateTimeField(null=True)),
                (
                    "finding",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="insights.finding",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["day"], name="findingdayhours_day_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("finding", "day", "currency", "measured"),
                        name="findingdayhours_one",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="FindingDayOwner",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("project_id", models.BigIntegerField(null=True)),
                ("experiment_id", models.BigIntegerField(null=True)),
                ("deployment_id", models.BigIntegerField(null=True)),
                ("spend", models.DecimalField(decimal_places=15, max_digits=38)),
                (
                    "finding",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="insights.finding",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["finding", "day"], name="findingdayowner_finding_idx"),
                    models.Index(fields=["day"], name="findingdayowner_day_idx"),
                ],
            },
        ),
        migrations.RunPython(lives_fill, migrations.RunPython.noop),
    ]
