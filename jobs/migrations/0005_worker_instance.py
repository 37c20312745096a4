from django.db import migrations, models


def forget_heartbeats(apps, schema_editor):
    # Heartbeats are rewritten by every live worker within seconds; rows keyed
    # by hostname alone cannot name an instance, so they are dropped.
    apps.get_model("jobs", "WorkerHeartbeat").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0004_job_sent_at"),
    ]

    operations = [
        migrations.RunPython(forget_heartbeats, migrations.RunPython.noop),
        migrations.AlterModelOptions(name="workerheartbeat", options={"ordering": ["hostname", "started_at"]}),
        migrations.AlterField(
            model_name="workerheartbeat", name="hostname", field=models.CharField(db_index=True, max_length=255),
        ),
        migrations.AddField(
            model_name="workerheartbeat", name="instance",
            field=models.CharField(default="", max_length=255, unique=True), preserve_default=False,
        ),
        migrations.AlterField(
            model_name="job", name="worker",
            field=models.CharField(blank=True, default="", help_text="the worker instance (hostname/pid/boot id) that claimed it last", max_length=255),
        ),
    ]
