"""The storage page's rollups of DailyStorageCost, at the grains its figures read: per project and
day, per project and month, for the whole organisation per day, and per bucket and day. Backfilled
from the storage rollup rows already there, one grouped statement each."""

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    # As 0009 did, the import's own code writes them, so that old and new deliveries read alike.
    from apps.billing.loader import storage_summary_rebuild

    storage_summary_rebuild(delivery_id=None)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0013_unused_commitment_index'),
        ('projects', '0002_tag_key_alias_data_class_and_model'),
    ]

    operations = [
        migrations.CreateModel(
            name='DailyBucketStorage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('resource_id', models.CharField(max_length=1000)),
                ('data_class', models.CharField(max_length=20)),
                ('billing_currency', models.CharField(max_length=10)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('stored_byte_seconds', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
                ('project', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='bucketstorage_day_idx'), models.Index(fields=['project', 'day'], name='bucketstorage_project_day_idx')],
            },
        ),
        migrations.CreateModel(
            name='DailyStorageSummary',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('data_class', models.CharField(max_length=20)),
                ('usage_class', models.CharField(max_length=20)),
                ('transfer_from', models.CharField(blank=True, max_length=100)),
                ('transfer_to', models.CharField(blank=True, max_length=100)),
                ('billing_currency', models.CharField(max_length=10)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('stored_byte_seconds', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('moved_bytes', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('day', models.DateField()),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
                ('project', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='storagesummary_day_idx'), models.Index(fields=['project', 'day'], name='storagesummary_project_day_idx'), models.Index(fields=['usage_class', 'day'], name='storagesummary_usage_day_idx')],
            },
        ),
        migrations.CreateModel(
            name='DailyStorageTotal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('data_class', models.CharField(max_length=20)),
                ('usage_class', models.CharField(max_length=20)),
                ('transfer_from', models.CharField(blank=True, max_length=100)),
                ('transfer_to', models.CharField(blank=True, max_length=100)),
                ('billing_currency', models.CharField(max_length=10)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('stored_byte_seconds', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('moved_bytes', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('day', models.DateField()),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='storagetotal_day_idx')],
            },
        ),
        migrations.CreateModel(
            name='MonthlyStorageSummary',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('data_class', models.CharField(max_length=20)),
                ('usage_class', models.CharField(max_length=20)),
                ('transfer_from', models.CharField(blank=True, max_length=100)),
                ('transfer_to', models.CharField(blank=True, max_length=100)),
                ('billing_currency', models.CharField(max_length=10)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('stored_byte_seconds', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('moved_bytes', models.DecimalField(decimal_places=6, default=0, max_digits=38)),
                ('month', models.DateField(help_text="The month's first day.")),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
                ('project', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project')),
            ],
            options={
                'indexes': [models.Index(fields=['month'], name='storagemonth_month_idx'), models.Index(fields=['project', 'month'], name='storagemonth_project_month_idx')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
