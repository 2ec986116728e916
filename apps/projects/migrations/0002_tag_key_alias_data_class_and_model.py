from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("projects", "0001_initial")]

    operations = [
        migrations.AlterField(
            model_name="tagkeyalias",
            name="dimension",
            field=models.CharField(
                choices=[
                    ("project", "Project"),
                    ("experiment", "Experiment"),
                    ("deployment", "Deployment"),
                    ("data_class", "Data class"),
                    ("model", "Model"),
                ],
                max_length=20,
            ),
        ),
    ]
