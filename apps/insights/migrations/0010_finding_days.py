"""The finding-hours per day, and the line-hours several findings share grouped by those
findings, what the pages' findings figures read on PostgreSQL. Filled from the hours already
there by the recompute's own rebuild (apps/insights/days.py)."""

import django.db.models.deletion
from django.db import migrations, models


def fill(apps, schema_editor):
    # As billing 0016 does, the code that keeps them writes them, so old and new hours read alike.
    from apps.insights.days import day_rollup_rebuild

    # Without the months: their table comes with 0011, which sums them from these days.
    day_rollup_rebuild(start=None, end=None, months=False, lives=False)


class Migration(migrations.Migration):

    dependencies = [
        ('insights', '0009_recompute_line'),
    ]

    operations = [
        migrations.CreateModel(
            name='FindingShareGroup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('members', models.TextField(help_text="The findings' ids, sorted, comma-separated.", unique=True)),
                ('size', models.PositiveIntegerField()),
            ],
        ),
        migrations.CreateModel(
            name='FindingShareMember',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('finding', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='insights.finding')),
                ('group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='insights.findingsharegroup')),
            ],
        ),
        migrations.CreateModel(
            name='FindingDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('currency', models.CharField(max_length=10)),
                ('wasted', models.DecimalField(decimal_places=15, max_digits=38)),
                ('alone', models.DecimalField(decimal_places=15, max_digits=38)),
                ('finding', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='days', to='insights.finding')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='findingday_day_idx')],
                'constraints': [models.UniqueConstraint(fields=('finding', 'day', 'currency'), name='findingday_one_per_day')],
            },
        ),
        migrations.CreateModel(
            name='FindingSharedHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('line_key', models.CharField(max_length=1500)),
                ('hour', models.DateTimeField()),
                ('currency', models.CharField(max_length=10)),
                ('wasted', models.DecimalField(decimal_places=15, max_digits=38)),
                ('spend', models.DecimalField(decimal_places=15, max_digits=38)),
                ('finding', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='insights.finding')),
                ('group', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='insights.findingsharegroup')),
            ],
            options={
                'indexes': [models.Index(fields=['group', 'hour'], name='findingshared_group_idx'), models.Index(fields=['hour'], name='findingshared_hour_idx')],
            },
        ),
        migrations.CreateModel(
            name='FindingShareDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('day', models.DateField()),
                ('currency', models.CharField(max_length=10)),
                ('counted', models.DecimalField(decimal_places=15, max_digits=38)),
                ('group', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='insights.findingsharegroup')),
            ],
            options={
                'indexes': [models.Index(fields=['day'], name='findingshareday_day_idx')],
                'constraints': [models.UniqueConstraint(fields=('group', 'day', 'currency'), name='findingshareday_one_per_day')],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
