"""The data version gains two parts read with it: `joined` (names, teams, who sees what) and
`findings` (moved by every change of findings), so that the findings figures no longer follow
every change of spend, nor the spend figures every change of findings."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("spend", "0005_traffic_writes")]

    operations = [
        migrations.AddField(
            model_name="spenddataversion",
            name="joined",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="spenddataversion",
            name="findings",
            field=models.PositiveBigIntegerField(default=0),
        ),
    ]
