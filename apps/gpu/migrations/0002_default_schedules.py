from django.db import migrations


class Migration(migrations.Migration):
    """Once created the GPU app's default schedule; they are all created after every migrate now,
    from costsite/schedules.py. Kept, empty, so that the migration graph stays as deployed."""

    dependencies = [
        ("gpu", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = []
