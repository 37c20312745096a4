import logging

from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _

logger = logging.getLogger(__name__)


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = _("Knowledge")

    def ready(self):
        post_migrate.connect(_ensure_vector_index, sender=self)
        from agents.static_filters import install_parser
        from jobs.kinds import register_job_kind
        from knowledge import operations  # noqa: F401 - declares the knowledge operations
        from knowledge import tasks
        from knowledge.search.filters import parse_filter

        install_parser(parse_filter)  # tokens' static filters are knowledge's filter expressions
        register_job_kind("evolve", tasks.run_evolve, readable_subjects=_readable_items)
        register_job_kind("slim", tasks.run_slim, scopes_param="writable_scopes")


def _readable_items(readable_scopes):
    """The ids of the items readable with `readable_scopes`: an evolve job is visible to its item's readers."""
    from knowledge.models import Knowledge

    return Knowledge.objects.readable_with(readable_scopes).values("id")


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
