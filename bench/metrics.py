"""Retrieval metrics: they live in `knowledge.search.metrics`, which the installed app needs too."""
from knowledge.search.metrics import mean, mrr_at_k, ndcg_at_k, recall_at_k

__all__ = ["mean", "mrr_at_k", "ndcg_at_k", "recall_at_k"]
