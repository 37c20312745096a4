"""Drop each embedder's HNSW graph over all its items: every search walks one script's graph (knowledge/search/vector.py
builds one per writing system, items without letters included), and the graph over every script cost each vector
written one more 896-dimension HNSW insert (BENCHMARKS.md, "Writes"). Found by definition, not by name: the graphs
that `vector.ensure_index` built without a script condition."""
from django.db import migrations

DROP = """
DO $$
DECLARE graph record;
BEGIN
    FOR graph IN SELECT indexname FROM pg_indexes
                 WHERE schemaname = current_schema() AND tablename = 'knowledge_knowledge'
                   AND indexname LIKE 'knowledge\\_hnsw\\_%' AND indexdef LIKE '%USING hnsw%'
                   AND indexdef NOT LIKE '%(script)::text =%'
    LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', graph.indexname);
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0004_search_generation")]

    # Back: nothing to do here; an older release's vector.ensure_index builds its graph again when it searches.
    operations = [migrations.RunSQL(DROP, reverse_sql=migrations.RunSQL.noop)]
