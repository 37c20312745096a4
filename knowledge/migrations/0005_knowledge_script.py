from django.db import migrations, models


def fill_scripts(apps, schema_editor):
    """Existing items get the script of their task + content, in batches."""
    from knowledge.search.embeddings import item_text
    from knowledge.search.text import script_of

    Knowledge = apps.get_model("knowledge", "Knowledge")
    batch = []
    for item in Knowledge.objects.only("id", "task", "content").iterator(chunk_size=500):
        item.script = script_of(item_text(item.task, item.content))
        batch.append(item)
        if len(batch) == 500:
            Knowledge.objects.bulk_update(batch, ["script"])
            batch = []
    Knowledge.objects.bulk_update(batch, ["script"])


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0004_slim_rejection'),
    ]

    operations = [
        migrations.AddField(
            model_name='knowledge',
            name='script',
            field=models.CharField(blank=True, default='', editable=False, max_length=12),
        ),
        migrations.RunPython(fill_scripts, migrations.RunPython.noop),
    ]
