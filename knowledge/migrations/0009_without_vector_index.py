"""An index on the items still without a vector (`indexing.stale_items`: the worker's sweep every 15 seconds and the
/metrics pending count read the whole table to find none: ~100 ms of the database's CPU at 100k items, EXPLAIN
ANALYZE; 0.1 ms with it). Built concurrently: saves and reports go on while it builds."""
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('knowledge', '0008_document_uri_index'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='knowledge',
            index=models.Index(condition=models.Q(('embedding__isnull', True)), fields=['created_at', 'id'], name='knowledge_without_vector'),
        ),
    ]
