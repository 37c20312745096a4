"""Loading what the first search needs before a web process takes requests.

Left lazy, jieba's dictionary, its IDF table and the embedding models load
inside the first search a process serves (about three seconds on two
cores), so an agent's first search after a deploy or a worker restart
waits for them. The web entry points (knowhub_site/wsgi.py, asgi.py) call
`warm_up_web_process` while gunicorn boots the worker; KNOWHUB_WARM_UP=false skips it.
"""
import logging
import time

logger = logging.getLogger(__name__)


def warm_up_web_process() -> None:
    """`warm_up`, unless KNOWHUB_WARM_UP=false."""
    from core.env import env_bool

    if env_bool("KNOWHUB_WARM_UP", True):
        warm_up()


def warm_up() -> float:
    """Load the segmenter, the word rarity table and the embedder, and embed one query; returns the seconds taken."""
    from knowledge.search.embeddings import EmbedderError, get_embedder
    from knowledge.search.model_client import RemoteModel, wait_for_models
    from knowledge.search.text import informativeness, segment

    started = time.monotonic()
    segment("预热检索")
    informativeness("检索")
    try:
        embedder = get_embedder()
        remote = [part.name for part in getattr(embedder, "parts", [embedder]) if isinstance(part, RemoteModel)]
        if remote and not wait_for_models(remote):
            logger.warning("the model service has not loaded %s yet", ", ".join(remote))
        embedder.embed_query("warm up")
    except EmbedderError as exc:  # search falls back to keywords; it says so per request
        logger.warning("embedder not loaded at start: %s", exc)
    return time.monotonic() - started
