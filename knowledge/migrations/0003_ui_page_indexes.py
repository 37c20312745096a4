"""Indexes for the curation pages at scale (issue 14): newest first over every status, most harmful first among
active items, reports and versions by date. Built CONCURRENTLY: a large base keeps taking writes meanwhile."""
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("knowledge", "0002_conflicts_supersede_proposals"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="feedbackcase",
            index=models.Index(fields=["created_at", "kind"], name="feedback_created"),
        ),
        AddIndexConcurrently(
            model_name="knowledge",
            index=models.Index(fields=["-created_at", "-id"], name="knowledge_created"),
        ),
        AddIndexConcurrently(
            model_name="knowledge",
            index=models.Index(condition=models.Q(("status", "active")), fields=["-harmful", "-created_at", "id"],
                               name="knowledge_active_harmful"),
        ),
        AddIndexConcurrently(
            model_name="knowledgeversion",
            index=models.Index(fields=["-created_at"], name="version_created"),
        ),
    ]
