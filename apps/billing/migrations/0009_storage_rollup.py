"""The storage rollup (DailyStorageCost): data class, model, usage class, transfer ends, bytes.

Backfilled from the storage and network lines already loaded, per current delivery, in the
database's own grouping (a day's lines of one wording become one row) and the import's
classification (billing.storage), so that old and new deliveries read alike.
"""

import time

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    from apps.billing.loader import write_storage_from_sql
    from apps.billing.storage import StorageFacts

    Delivery = apps.get_model("billing", "Delivery")
    CostLineItem = apps.get_model("billing", "CostLineItem")
    facts = StorageFacts.from_rows(
        apps.get_model("projects", "TagKeyAlias").objects.values_list("dimension", "key"),
        list(
            apps.get_model("deployments", "Model").objects.values_list("id", "name", "external_id")
        ),
        apps.get_model("experiments", "Experiment").objects.values_list("id", "model_id"),
        apps.get_model("deployments", "Deployment").objects.values_list("id", "model_id"),
    )
    table = CostLineItem._meta.db_table
    clock = time.monotonic()
    written = 0
    for delivery in Delivery.objects.filter(status="current").order_by("pk").iterator():
        where = "delivery_id = %s AND cost_kind IN ('storage', 'network')"
        params = [delivery.pk]
        if delivery.last_line_id:
            where += " AND id > %s AND id <= %s"
            params += [delivery.first_line_id, delivery.last_line_id]
        written += write_storage_from_sql(table, where, params, facts)
    if written:
        print(f"\n  storage rollup: {written:,} rows in {time.monotonic() - clock:.1f} s", end="")


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0008_model_api_spend"),
        ("deployments", "0003_traffichour"),
        ("experiments", "0003_metricpoint"),
        ("projects", "0002_tag_key_alias_data_class_and_model"),
    ]

    operations = [
        migrations.CreateModel(
            name="DailyStorageCost",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("data_class", models.CharField(max_length=20)),
                ("usage_class", models.CharField(max_length=20)),
                ("provider_name", models.CharField(blank=True, max_length=200)),
                ("region_id", models.CharField(blank=True, max_length=100)),
                ("resource_id", models.CharField(blank=True, max_length=1000)),
                ("transfer_from", models.CharField(blank=True, max_length=100)),
                ("transfer_to", models.CharField(blank=True, max_length=100)),
                ("billing_currency", models.CharField(max_length=10)),
                ("effective_cost", models.DecimalField(decimal_places=15, max_digits=38)),
                ("billed_cost", models.DecimalField(decimal_places=15, max_digits=38)),
                (
                    "stored_byte_seconds",
                    models.DecimalField(decimal_places=6, default=0, max_digits=38),
                ),
                ("moved_bytes", models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ("line_items", models.BigIntegerField()),
                (
                    "delivery",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="billing.delivery",
                    ),
                ),
                (
                    "deployment",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="deployments.deployment",
                    ),
                ),
                (
                    "experiment",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="experiments.experiment",
                    ),
                ),
                (
                    "model",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="deployments.model",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="projects.project",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["day"], name="dailystorage_day_idx"),
                    models.Index(fields=["project", "day"], name="dailystorage_project_day_idx"),
                    models.Index(fields=["model", "day"], name="dailystorage_model_day_idx"),
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
