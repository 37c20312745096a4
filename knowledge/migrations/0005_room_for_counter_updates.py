"""Room on each page of the items for their counters' updates.

A report on an item rewrites its row (`helpful`/`harmful`/`updated_at`); when the new version fits on the same page
and no indexed column changed, PostgreSQL writes it there without touching any index (a HOT update). With pages
filled to the brim, as inserts leave them, almost no report found room: each one added an entry to every index of
the row, three HNSW graphs among them. Measured on the 100k seed (BENCHMARKS.md "Writes"): 2% of helpful updates
HOT and 4.9 ms each with pages full; 94% and 0.7 ms with pages filled to 80%. A setting for the pages written from
now on: docs/DEPLOY.md says how to rewrite an existing large table's.
"""
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0004_search_generation")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE knowledge_knowledge SET (fillfactor = 80)",
            reverse_sql="ALTER TABLE knowledge_knowledge RESET (fillfactor)",
        ),
    ]
