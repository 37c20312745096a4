"""Documents in: text extraction, chunking, safe URL fetching, and the ingestion of documents as knowledge items."""
