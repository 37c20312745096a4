"""The search generation: a sequence that every write to what a search reply shows advances, for the result cache.

Why a statement trigger, an advisory lock and a transaction-local flag: knowledge/search/result_cache.py.
The lock is (7240, 3) in the two-key space (the project's other advisory locks use single bigint keys,
a separate space).
"""
from django.db import migrations

# What a search reply shows: the items ranked and shown, their resource links, their open conflicts.
TABLES = ("knowledge_knowledge", "knowledge_knowledgeresource", "knowledge_conflict")

FUNCTIONS = """
CREATE SEQUENCE knowhub_search_generation;
SELECT setval('knowhub_search_generation', 1, true);  -- is_called: the first write moves last_value from 1 to 2

CREATE FUNCTION knowhub_search_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The lock first, then the bump: whoever reads the bumped value finds the lock held until this
    -- transaction has ended, and then its writes are visible.
    PERFORM pg_advisory_xact_lock_shared(7240, 3);
    -- This transaction's own searches see writes a rollback may still undo: they must not be cached.
    PERFORM set_config('knowhub.search_written', 'on', true);
    PERFORM nextval('knowhub_search_generation');
    RETURN NULL;
END $$;

-- The generation, and whether a search run now may be cached under it: no write to the tables is in
-- flight in another transaction, and none was made earlier in this one.
CREATE FUNCTION knowhub_search_generation(OUT generation bigint, OUT storable boolean) LANGUAGE plpgsql AS $$
BEGIN
    SELECT last_value INTO generation FROM knowhub_search_generation;  -- before the lock test, never after
    IF coalesce(current_setting('knowhub.search_written', true), '') = 'on' THEN
        storable := false;
    ELSE
        storable := pg_try_advisory_lock(7240, 3);  -- fails while any writer holds its shared lock
        IF storable THEN
            PERFORM pg_advisory_unlock(7240, 3);
        END IF;
    END IF;
END $$;
"""

TRIGGERS = "".join(f"""
CREATE TRIGGER {table}_search_written AFTER INSERT OR UPDATE OR DELETE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION knowhub_search_written();
CREATE TRIGGER {table}_search_truncated AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION knowhub_search_written();
""" for table in TABLES)

DROP = "".join(f"""
DROP TRIGGER {table}_search_truncated ON {table};
DROP TRIGGER {table}_search_written ON {table};
""" for table in TABLES) + """
DROP FUNCTION knowhub_search_generation();
DROP FUNCTION knowhub_search_written();
DROP SEQUENCE knowhub_search_generation;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0003_ui_page_indexes"),
    ]

    operations = [migrations.RunSQL(FUNCTIONS + TRIGGERS, DROP)]
