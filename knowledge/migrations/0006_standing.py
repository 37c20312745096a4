"""Each item's standing (quality, helpful, creation time) in a narrow table of its own, for the curation list's sorts
(knowledge.models.Standing), kept by triggers on the items: inserts and deletes once per statement (the bulk path's
INSERT of 1,000 items is one trigger call), updates per row and only when a copied column changed."""

import django.db.models.deletion
from django.db import migrations, models


def quality(row: str = "") -> str:
    """knowledge.quality.QUALITY in SQL, of the columns of `row` (a trigger's NEW) or of the table read."""
    return f"{row}score + {row}helpful - 2 * {row}harmful"


TRIGGERS = f"""
CREATE FUNCTION knowhub_standing_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO knowledge_standing (knowledge_id, quality, helpful, created_at)
    SELECT id, {quality()}, helpful, created_at FROM inserted;
    RETURN NULL;
END $$;

CREATE FUNCTION knowhub_standing_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE knowledge_standing SET quality = {quality("NEW.")}, helpful = NEW.helpful,
                                  created_at = NEW.created_at
    WHERE knowledge_id = NEW.id;
    RETURN NULL;
END $$;

CREATE FUNCTION knowhub_standing_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM knowledge_standing WHERE knowledge_id IN (SELECT id FROM deleted);
    RETURN NULL;
END $$;

CREATE TRIGGER knowhub_standing_insert AFTER INSERT ON knowledge_knowledge
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION knowhub_standing_inserted();
CREATE TRIGGER knowhub_standing_update AFTER UPDATE OF score, helpful, harmful, created_at ON knowledge_knowledge
    FOR EACH ROW WHEN (OLD.score IS DISTINCT FROM NEW.score OR OLD.helpful IS DISTINCT FROM NEW.helpful
                       OR OLD.harmful IS DISTINCT FROM NEW.harmful OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION knowhub_standing_updated();
CREATE TRIGGER knowhub_standing_delete AFTER DELETE ON knowledge_knowledge
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION knowhub_standing_deleted();

-- DELETE, not TRUNCATE: a TRUNCATE of both tables in one statement (Django's flush) holds knowledge_standing open.
CREATE FUNCTION knowhub_standing_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM knowledge_standing;
    RETURN NULL;
END $$;
CREATE TRIGGER knowhub_standing_truncate AFTER TRUNCATE ON knowledge_knowledge
    FOR EACH STATEMENT EXECUTE FUNCTION knowhub_standing_truncated();

INSERT INTO knowledge_standing (knowledge_id, quality, helpful, created_at)
SELECT id, {quality()}, helpful, created_at FROM knowledge_knowledge;
ANALYZE knowledge_standing;
"""

DROP_TRIGGERS = """
DROP TRIGGER knowhub_standing_insert ON knowledge_knowledge;
DROP TRIGGER knowhub_standing_update ON knowledge_knowledge;
DROP TRIGGER knowhub_standing_delete ON knowledge_knowledge;
DROP TRIGGER knowhub_standing_truncate ON knowledge_knowledge;
DROP FUNCTION knowhub_standing_truncated();
DROP FUNCTION knowhub_standing_inserted();
DROP FUNCTION knowhub_standing_updated();
DROP FUNCTION knowhub_standing_deleted();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0005_no_graph_across_scripts'),
    ]

    operations = [
        migrations.CreateModel(
            name='Standing',
            fields=[
                ('knowledge', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='standing', serialize=False, to='knowledge.knowledge')),
                ('quality', models.IntegerField()),
                ('helpful', models.IntegerField()),
                ('created_at', models.DateTimeField()),
            ],
            options={
                'indexes': [models.Index(models.OrderBy(models.F('quality'), descending=True), models.OrderBy(models.F('created_at'), descending=True), models.F('knowledge'), name='standing_by_quality'), models.Index(models.OrderBy(models.F('helpful'), descending=True), models.OrderBy(models.F('created_at'), descending=True), models.F('knowledge'), name='standing_by_helpful')],
            },
        ),
        migrations.RunSQL(TRIGGERS, reverse_sql=DROP_TRIGGERS),
    ]
