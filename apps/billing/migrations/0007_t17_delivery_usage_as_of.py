from django.db import migrations, models
from django.db.models import Max, Q


def backfill(apps, schema_editor):
    """Deliveries loaded before the field existed: the newest end of their usage lines."""
    Delivery = apps.get_model("billing", "Delivery")
    CostLineItem = apps.get_model("billing", "CostLineItem")
    usage = Q(charge_category="Usage") & Q(charge_frequency__in=["", "Usage-Based"])
    for delivery in Delivery.objects.filter(status="current").iterator():
        lines = CostLineItem.objects.filter(delivery_id=delivery.pk)
        if delivery.last_line_id:
            lines = lines.filter(id__gt=delivery.first_line_id, id__lte=delivery.last_line_id)
        newest = lines.filter(usage).aggregate(newest=Max("charge_period_end"))["newest"]
        Delivery.objects.filter(pk=delivery.pk).update(max_usage_period_end=newest)


class Migration(migrations.Migration):
    dependencies = [("billing", "0006_resource_project_day_index")]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="max_usage_period_end",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
