"""MonthlyResourceCost: DailyResourceCost summed per calendar month, what a long range's
unattributed spend reads for its whole months. Backfilled from the daily resource rows already
there, as the import writes it (one grouped statement)."""

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    # As 0016 does, the import's own code writes them, so that old and new deliveries read alike.
    from apps.billing.loader import resource_monthly_rebuild

    resource_monthly_rebuild(delivery_id=None)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0016_daily_project_cost'),
        ('projects', '0002_tag_key_alias_data_class_and_model'),
    ]

    operations = [
        migrations.CreateModel(
            name='MonthlyResourceCost',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text="The month's first day.")),
                ('resource_id', models.CharField(max_length=1000)),
                ('provider_name', models.CharField(blank=True, max_length=200)),
                ('billing_currency', models.CharField(max_length=10)),
                ('resource_name', models.CharField(blank=True, max_length=1000)),
                ('billing_account_id', models.CharField(max_length=200)),
                ('sub_account_id', models.CharField(blank=True, max_length=200)),
                ('service_name', models.CharField(blank=True, max_length=200)),
                ('region_id', models.CharField(blank=True, max_length=100)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('billed_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
                ('project', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project')),
            ],
            options={
                'indexes': [models.Index(fields=['month'], name='monthlyresource_month_idx'), models.Index(fields=['project', 'month'], name='monthlyresource_project_idx')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
