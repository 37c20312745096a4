"""The search generation: a sequence every write to the knowledge table advances, for the result cache.

Why a statement trigger, an advisory lock and a transaction-local flag: knowledge/search/result_cache.py.
The lock is (7240, 3) in the two-key space (the project's other advisory locks use single bigint keys,
a separate space).
"""
from django.db import migrations

FORWARD = """
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

CREATE TRIGGER knowledge_search_written AFTER INSERT OR UPDATE OR DELETE ON knowledge_knowledge
    FOR EACH STATEMENT EXECUTE FUNCTION knowhub_search_written();
CREATE TRIGGER knowledge_search_truncated AFTER TRUNCATE ON knowledge_knowledge
    FOR EACH STATEMENT EXECUTE FUNCTION knowhub_search_written();

-- The generation, and whether a search run now may be cached under it: no write to the knowledge table is
-- in flight in another transaction, and none was made earlier in this one.
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

BACKWARD = """
DROP FUNCTION knowhub_search_generation();
DROP TRIGGER knowledge_search_truncated ON knowledge_knowledge;
DROP TRIGGER knowledge_search_written ON knowledge_knowledge;
DROP FUNCTION knowhub_search_written();
DROP SEQUENCE knowhub_search_generation;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0002_conflicts_supersede_proposals"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
