from django.db import migrations


def create_schedules(apps, schema_editor):
    from apps.gpu.schedules import schedules_ensure

    schedules_ensure(
        periodic_task_model=apps.get_model("django_celery_beat", "PeriodicTask"),
        interval_model=apps.get_model("django_celery_beat", "IntervalSchedule"),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("gpu", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedules, migrations.RunPython.noop)]
