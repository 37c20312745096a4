import logging

from django.apps import AppConfig
from django.db.models.signals import post_migrate

logger = logging.getLogger(__name__)


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self):
        post_migrate.connect(_ensure_vector_index, sender=self)
        _register_operation_inputs()


def _register_operation_inputs():
    """What the chain's validate_input filter checks each operation's raw `data` with."""
    from agents.builtin_filters import register_input
    from knowledge.api import serializers as s

    for operation, serializer_class in {
        "knowledge_search": s.SearchInput,
        "knowledge_list": s.KnowledgeListInput,
        "knowledge_save": s.KnowledgeCreateInput,
        "knowledge_update": s.KnowledgeUpdateInput,
        "knowledge_edit": s.KnowledgePatchInput,
        "knowledge_batch_update": s.BatchUpdateInput,
        "knowledge_slim": s.SlimInput,
    }.items():
        register_input(operation, serializer_class)


def _ensure_vector_index(sender, using="default", **kwargs):
    """After migrations: the HNSW index for the configured embedder exists."""
    from knowledge.search.embeddings import EmbedderError, get_embedder
    from knowledge.search.vector import ensure_index

    try:
        embedder = get_embedder()
    except EmbedderError as exc:
        logger.warning("no vector index created: %s", exc)
        return
    ensure_index(embedder.name, embedder.dimensions)
