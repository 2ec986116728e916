"""DailyProjectCost: DailyCost summed per day, project, workload, cost kind and provider, what
the spend pages' series, project totals and month so far read. Backfilled from the daily rows
already there, as the import writes it (one grouped statement)."""

import django.db.models.deletion
from django.db import migrations, models


def backfill(apps, schema_editor):
    # As 0014 does, the import's own code writes them, so that old and new deliveries read alike.
    from apps.billing.loader import project_daily_rebuild

    project_daily_rebuild(delivery_id=None)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0015_unattributed_resource_index'),
        ('projects', '0002_tag_key_alias_data_class_and_model'),
    ]

    operations = [
        migrations.CreateModel(
            name='DailyProjectCost',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('workload', models.CharField(choices=[('training', 'Training'), ('fine_tuning', 'Fine-tuning'), ('inference', 'Inference'), ('development', 'Development'), ('storage', 'Storage'), ('network', 'Network'), ('other', 'Other'), ('unattributed', 'Unattributed')], max_length=20)),
                ('cost_kind', models.CharField(choices=[('gpu_compute', 'GPU compute'), ('cpu_compute', 'CPU compute'), ('storage', 'Storage'), ('network', 'Network'), ('model_api', 'Model API'), ('other', 'Other')], max_length=20)),
                ('provider_name', models.CharField(blank=True, max_length=200)),
                ('billing_currency', models.CharField(max_length=10)),
                ('effective_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('billed_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('list_cost', models.DecimalField(decimal_places=15, max_digits=38)),
                ('consumed_hours', models.DecimalField(decimal_places=15, default=0, max_digits=38)),
                ('line_items', models.BigIntegerField()),
                ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='billing.delivery')),
                ('project', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='projectcost_day_idx'), models.Index(fields=['project', 'day'], name='projectcost_project_day_idx')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
