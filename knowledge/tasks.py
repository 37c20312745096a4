"""Celery tasks: take ids, re-fetch, call one service."""
from celery import shared_task

from knowledge.search.embeddings import EmbedderError


@shared_task(bind=True, autoretry_for=(EmbedderError,), retry_backoff=10, retry_backoff_max=600, max_retries=8)
def embed_knowledge(self, knowledge_id: str) -> None:
    from knowledge.models import Knowledge
    from knowledge.search.indexing import embed_items

    item = Knowledge.objects.filter(pk=knowledge_id).only("id", "task", "content").first()
    if item is not None:
        embed_items(items=[item])
